package trace

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// EnvFile is the environment variable by which a test asks a program it
// runs (the example servers) to record its steps: the file, JSON lines
// appended as each step ends, so that a process killed between two steps
// has written every step it finished.
const EnvFile = "IDEM_TRACE_FILE"

// FromEnv starts recording into the file that EnvFile names in getenv's
// environment, if any, for the life of the process; a program calls it at
// start-up.
func FromEnv(getenv func(string) string) error {
	path := getenv(EnvFile)
	if path == "" {
		return nil
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("trace: %w", err)
	}
	r := &Recorder{file: f, enc: json.NewEncoder(f)}
	recorders.Store(r, struct{}{})
	active.Add(1)
	return nil
}

// line is a line of a recorder's file: a record's step or an outbox's.
type line struct {
	Step     *Step     `json:"step,omitempty"`
	Delivery *Delivery `json:"delivery,omitempty"`
}

// ReadFiles reads the steps that programs recorded into the files of dir
// matching pattern: the records' and the outboxes'.
func ReadFiles(dir, pattern string) ([]Step, []Delivery, error) {
	paths, err := filepath.Glob(filepath.Join(dir, pattern))
	if err != nil {
		return nil, nil, err
	}
	var steps []Step
	var ds []Delivery
	for _, p := range paths {
		if err := readFile(p, &steps, &ds); err != nil {
			return nil, nil, err
		}
	}
	return steps, ds, nil
}

func readFile(path string, steps *[]Step, ds *[]Delivery) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var l line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			continue // the last line of a process killed while writing it
		}
		if l.Step != nil {
			*steps = append(*steps, *l.Step)
		}
		if l.Delivery != nil {
			*ds = append(*ds, *l.Delivery)
		}
	}
	return sc.Err()
}
