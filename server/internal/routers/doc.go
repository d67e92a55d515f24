// Package routers holds the tests of package server behind the routers
// that stay net/http: chi (5.2 and later). It is a module of its own, so
// that the root module's go.mod does not require the routers it tests.
package routers
