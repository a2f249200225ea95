package main

import "testing"

// TestBenchSmoke runs the whole bench, floor, phases, sharing and hook
// scaling rounds, on a small workload on the real test bed, so that `make
// bench` cannot rot unnoticed. It checks what the bench must show whatever
// the machine: every phase and round converges, a resync of unchanged
// parents writes nothing, a second controller on the same child kind opens
// no watch of its own, and the calls of hooks in other processes are
// counted. It asserts no timings.
func TestBenchSmoke(t *testing.T) {
	cfg, err := parseFlags([]string{"-parents", "6", "-children", "2", "-concurrency", "4",
		"-sharing", "1,2", "-sharing-parents", "10", "-phase-timeout", "3m", "-out", t.TempDir(),
		"-hook-workers", "1,2", "-hook-delay", "20ms", "-hook-concurrency", "2"})
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
		if p.Parents > 0 && p.UCAllocatedMB <= 0 {
			t.Errorf("phase %s: uc allocated %.3f MB", p.Name, p.UCAllocatedMB)
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
	if res.MemoryPer1000Parents == nil {
		t.Error("no memory per 1,000 parents")
	}
	// in-process create and two updates, bus-native ×1 and ×2, webhook
	if res.HookScaling == nil || len(res.HookScaling.Rounds) != 6 {
		t.Fatalf("hook scaling: %+v, want 6 rounds", res.HookScaling)
	}
	for _, r := range res.HookScaling.Rounds {
		if !r.Converged || !r.Idle || r.HookSpread.Parents != 6 {
			t.Errorf("hook round %s: converged %t, idle %t, %d parents called (want 6)", r.Name, r.Converged, r.Idle, r.HookSpread.Parents)
		}
		t.Logf("hook round %s: %.2fs, %d hook calls", r.Name, r.Seconds, r.HookCalls)
	}
}
