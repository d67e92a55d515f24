// Package gobuild compiles the repository's programs for the tests that run
// them as processes of their own.
package gobuild

import (
	"fmt"
	"os/exec"
)

// Build compiles the Go package pkg (an import path, or a directory such as
// ".") into the file bin, with the go command found on PATH. The error says
// what is missing, or carries the compiler's output.
func Build(pkg, bin string) error {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("the go command is needed to build %s: %w", pkg, err)
	}
	if out, err := exec.Command(goBin, "build", "-o", bin, pkg).CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", pkg, err, out)
	}
	return nil
}

// BuildIn is Build run in the directory dir: the way to build a program of
// another module of the repository (cd idemredis && go build
// ./example/server), which the go command then builds with that module's
// go.mod, not the caller's. bin must be an absolute path.
func BuildIn(dir, pkg, bin string) error {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("the go command is needed to build %s: %w", pkg, err)
	}
	cmd := exec.Command(goBin, "build", "-o", bin, pkg)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s in %s: %w\n%s", pkg, dir, err, out)
	}
	return nil
}
