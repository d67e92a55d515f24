//go:build !unix

package main

import (
	"errors"
	"os"
)

// notifyResume cannot resume a paused request where there is no SIGUSR1.
func notifyResume() (<-chan os.Signal, error) {
	return nil, errors.New("pause waits for SIGUSR1, a Unix signal")
}
