//go:build !unix

package main

import "errors"

// stopSelf cannot stop the process where there is no SIGSTOP.
func stopSelf() error { return errors.New("SIGSTOP is a Unix signal") }
