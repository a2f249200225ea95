package main

import "testing"

// TestBenchSmoke runs the whole bench, floor, phases and sharing rounds, on
// a small workload on the real test bed, so that `make bench` cannot rot
// unnoticed. It checks what the bench must show whatever the machine: every
// phase converges, a resync of unchanged parents writes nothing, and a
// second controller on the same child kind opens no watch of its own. It
// asserts no timings.
func TestBenchSmoke(t *testing.T) {
	cfg, err := parseFlags([]string{"-parents", "6", "-children", "2", "-concurrency", "4",
		"-sharing", "1,2", "-sharing-parents", "10", "-phase-timeout", "3m", "-out", t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	res := newResults(cfg)
	if err := measureAll(t.Context(), cfg, res); err != nil {
		t.Fatalf("bench: %v", err)
	}
	if len(res.Phases) != 6 {
		t.Fatalf("%d phases measured, want 6: %+v", len(res.Phases), res.Phases)
	}
	for _, p := range res.Phases {
		if !p.Converged || !p.Idle {
			t.Errorf("phase %s: converged %t, idle %t", p.Name, p.Converged, p.Idle)
		}
		if p.Name == "resync" && p.WorkloadWrites != 0 {
			t.Errorf("a resync of unchanged parents made %d writes: %v", p.WorkloadWrites, p.Requests)
		}
		t.Logf("%s: %.2fs, %d hook calls", p.Name, p.Seconds, p.HookCalls)
	}
	if len(res.Sharing) != 2 {
		t.Fatalf("%d sharing rounds, want 2", len(res.Sharing))
	}
	for _, s := range res.Sharing {
		if s.Watches["configmaps"] != 1 || s.HeapMiB <= 0 {
			t.Errorf("%d controllers: watches %v, live heap %.2f MiB; want one watch on configmaps", s.Controllers, s.Watches, s.HeapMiB)
		}
	}
}
