// Package proccpu reads the CPU time this process has used, for the
// benchmarks that report CPU per request beside wall time: on a shared
// machine it is the steadier measure of work.
package proccpu
