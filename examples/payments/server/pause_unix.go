//go:build unix

package main

import (
	"os"
	"os/signal"
	"syscall"
)

// notifyResume returns the channel on which SIGUSR1, the signal that lets
// a paused request go on, arrives.
func notifyResume() (<-chan os.Signal, error) {
	resume := make(chan os.Signal, 1)
	signal.Notify(resume, syscall.SIGUSR1)
	return resume, nil
}
