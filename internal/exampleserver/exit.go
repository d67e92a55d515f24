package exampleserver

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// ErrUsage is the error a program's run returns when its flags or its
// environment are wrong, after it reported why: [Main] exits with status 2.
var ErrUsage = errors.New("usage")

// Run is a program: its arguments (without the program's name), its
// output, its environment; ctx ends on SIGINT or SIGTERM.
type Run func(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error

// Main runs run with the process's arguments, output and environment, and
// a context that SIGINT and SIGTERM end, then exits: status 0 after
// success or -h (flag.ErrHelp), 2 after [ErrUsage], and 1 after any other
// error, which it prints to stderr after name.
func Main(name string, run Run) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv)
	stop()
	os.Exit(exitCode(name, err, os.Stderr))
}

// exitCode is Main's exit status after err, which it reports on stderr
// when it is neither help nor usage.
func exitCode(name string, err error, stderr io.Writer) int {
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, ErrUsage):
		return 2
	}
	fmt.Fprintln(stderr, name+":", err)
	return 1
}

// Parse parses args with fs (which reports a bad flag on its output). It
// returns flag.ErrHelp after -h or -help, [ErrUsage] after a bad flag.
func Parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return ErrUsage
	}
	return nil
}
