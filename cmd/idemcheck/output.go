package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/idemkit/idem/internal/conformance"
)

// jsonReport is the -json document: the report and its overall result.
type jsonReport struct {
	*conformance.Report
	Passed bool `json:"passed"`
}

// writeJSON prints rep as one JSON document.
func writeJSON(w io.Writer, rep *conformance.Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(jsonReport{Report: rep, Passed: rep.Passed()})
}

// writeTable prints rep for people: the target, one line per check, the
// evidence of each failure, and the overall result.
func writeTable(w io.Writer, rep *conformance.Report) error {
	fmt.Fprintf(w, "idemcheck: %s %s (key header %s)\n", rep.Method, rep.URL, rep.KeyHeader)
	fmt.Fprintf(w, "effects: %s\n", rep.Effects)
	fmt.Fprintf(w, "seed: %d (-seed %d meets the same faults again)\n\n", rep.Seed, rep.Seed)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CHECK\tRESULT\tDETAIL")
	for _, res := range rep.Results {
		verdict := string(res.Verdict)
		if res.Verdict == conformance.Fail {
			verdict = "FAIL"
		}
		if !res.Required && res.Verdict != conformance.NotApplicable {
			verdict = "info"
		}
		detail := res.Detail
		if res.Basis != "" {
			detail += " [" + res.Basis + "]"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", res.Name, verdict, detail)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, res := range rep.Results {
		if res.Verdict == conformance.Fail {
			writeEvidence(w, res)
		}
	}
	_, err := fmt.Fprintln(w, "\n"+verdictLine(rep))
	return err
}

// writeEvidence prints the exchanges that show a failure.
func writeEvidence(w io.Writer, res conformance.Result) {
	if len(res.Evidence) == 0 {
		return
	}
	fmt.Fprintf(w, "\n%s failed:\n", res.Name)
	for _, e := range res.Evidence {
		fmt.Fprintf(w, "  %s\n", e.Note)
		if q := e.Request; q != nil {
			key := "no key"
			if !q.Keyless {
				key = "key " + q.Key
			}
			fmt.Fprintf(w, "    > %s %s (%s principal, %s)\n", q.Method, q.URL, q.Principal, key)
			writeBody(w, "    > ", q.Body)
		}
		if p := e.Response; p != nil {
			switch {
			case p.Error != "" && p.Status == 0:
				fmt.Fprintf(w, "    < no response: %s\n", p.Error)
			default:
				line := fmt.Sprintf("    < %d", p.Status)
				if p.Replayed != "" {
					line += " (replayed: " + p.Replayed + ")"
				}
				if p.Error != "" {
					line += " " + p.Error
				}
				fmt.Fprintln(w, line)
				writeBody(w, "    < ", p.Body)
			}
		}
	}
}

// writeBody prints a body, each line after prefix.
func writeBody(w io.Writer, prefix, body string) {
	body = strings.TrimRight(body, "\n")
	if body == "" {
		return
	}
	for _, l := range strings.Split(body, "\n") {
		fmt.Fprintf(w, "%s%s\n", prefix, l)
	}
}

// verdictLine sums the run up.
func verdictLine(rep *conformance.Report) string {
	counts := map[conformance.Verdict]int{}
	var failedNames []string
	for _, res := range rep.Results {
		counts[res.Verdict]++
		if res.Required && res.Verdict == conformance.Fail {
			failedNames = append(failedNames, res.Name)
		}
	}
	tally := fmt.Sprintf("%d pass, %d fail, %d n/a, %d info", counts[conformance.Pass], counts[conformance.Fail],
		counts[conformance.NotApplicable], counts[conformance.Info])
	if len(failedNames) > 0 {
		return fmt.Sprintf("FAIL: required checks failed: %s (%s)", strings.Join(failedNames, ", "), tally)
	}
	return fmt.Sprintf("PASS: every required check that applies passed (%s)", tally)
}
