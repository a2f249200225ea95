package main

import (
	"strings"
	"testing"
)

// TestFourPhases: the per-parent table ends with create, update, heal and
// delete together — issue 27's figure, uc's CPU per parent and phase — and
// only when the run had all four.
func TestFourPhases(t *testing.T) {
	phase := func(name string, parents int, uc, api, bench, allocatedMB float64) phaseResult {
		p := phaseResult{Name: name, Parents: parents}
		p.UCAllocatedMB = allocatedMB
		p.CPUSeconds = cpuSeconds{"uc": uc, apiserver: api, "bench": bench}
		return p
	}
	four := []phaseResult{
		phase("create", 1000, 6.0, 12.0, 3.0, 600),
		phase("update", 1000, 5.0, 15.0, 2.5, 500),
		phase("paced", 1000, 9.0, 9.0, 9.0, 900), // not one of the four
		phase("heal", 1000, 3.0, 4.0, 1.5, 300),
		phase("delete", 1000, 2.0, 25.0, 1.0, 100),
	}
	for _, tc := range []struct {
		name   string
		phases []phaseResult
		want   string // the row, "" for none
	}{
		{"all four", four, "the four  4.0 ms  375 KB  0.29  2.00"},
		{"no delete", four[:4], ""},
		{"create only", four[:1], ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out strings.Builder
			(&results{Phases: tc.phases}).printPerParent(&out)
			var row string
			for line := range strings.Lines(out.String()) {
				if f := strings.Fields(line); len(f) > 0 && f[0] == "the" {
					row = strings.Join(f, " ")
				}
			}
			if want := strings.Join(strings.Fields(tc.want), " "); row != want {
				t.Errorf("row %q, want %q; table:\n%s", row, want, out.String())
			}
		})
	}
}
