package gobuild

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBuild(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "hello")
	require.NoError(t, os.MkdirAll(src, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(src, "go.mod"), []byte("module hello\n\ngo 1.26\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(src, "main.go"), []byte("package main\n\nfunc main() { println(\"hello\") }\n"), 0o644))
	bin := filepath.Join(dir, "hello-bin")

	t.Chdir(src) // "." from inside the module, as the tests that use Build do
	require.NoError(t, Build(".", bin))
	out, err := exec.Command(bin).CombinedOutput()
	require.NoError(t, err)
	assert.Equal(t, "hello\n", string(out))
}

func TestBuildReportsTheCompilerOutput(t *testing.T) {
	err := Build("example.invalid/no/such/package", filepath.Join(t.TempDir(), "x"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "go build example.invalid/no/such/package")
}
