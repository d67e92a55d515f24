// Package exampleserver is the start-up that the example servers share
// (examples/payments/server, idemredis/example/server and
// otelidem/example/server, in three modules, which may all import an
// internal package of the root): [Main]'s signal handling and exit codes,
// and [Serve], a server on an address of its own stopped gracefully.
package exampleserver
