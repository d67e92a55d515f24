//go:build unix

package main

import (
	"os"
	"syscall"
)

// stopSelf stops the process with SIGSTOP; it returns when the process
// gets SIGCONT.
func stopSelf() error { return syscall.Kill(os.Getpid(), syscall.SIGSTOP) }
