package main

import (
	"slices"
	"testing"
)

// TestParseFlags holds each scenario's defaults of -skip and -sharing, and
// the phases -skip refuses to leave out.
func TestParseFlags(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		parents int
		skip    []string
		sharing []int
		err     bool
	}{
		{args: nil, parents: 200, sharing: []int{1, 5, 10}},
		{args: []string{"-scenario", "xl"}, parents: 10000, sharing: []int{1, 5, 10}},
		{args: []string{"-scenario", "xxl"}, parents: 50000, skip: []string{"delete", "resync"}},
		{args: []string{"-scenario", "xxl", "-skip", "", "-sharing", "1"}, parents: 50000, sharing: []int{1}},
		{args: []string{"-scenario", "full", "-skip", "delete, paced"}, parents: 1000, skip: []string{"delete", "paced"}, sharing: []int{1, 5, 10}},
		{args: []string{"-skip", "update"}, err: true},
		{args: []string{"-skip", "update,heal,paced"}, err: true},
		{args: []string{"-scenario", "xxl", "-skip", "update,heal,paced,resync,delete"}, parents: 50000, skip: []string{"update", "heal", "paced", "resync", "delete"}},
		{args: []string{"-skip", "create"}, err: true},
		{args: []string{"-skip", "nap"}, err: true},
	} {
		cfg, err := parseFlags(tc.args)
		if tc.err {
			if err == nil {
				t.Errorf("%q: no error", tc.args)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.args, err)
			continue
		}
		if cfg.parents != tc.parents || !slices.Equal(cfg.skip, tc.skip) || !slices.Equal(cfg.sharing, tc.sharing) {
			t.Errorf("%q: parents %d, skip %q, sharing %v; want %d, %q, %v", tc.args, cfg.parents, cfg.skip, cfg.sharing, tc.parents, tc.skip, tc.sharing)
		}
	}
}

// TestFloorFrom: -floor-from reuses the floor of a results file of the
// same workload, and refuses another workload's.
func TestFloorFrom(t *testing.T) {
	earlier := newResults(config{scenario: "xxl", parents: 50000, children: 5})
	earlier.Floor = []floorResult{{Name: "create", Seconds: 548}}
	path, err := earlier.writeJSON(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	floor, err := floorFrom(config{parents: 50000, children: 5, floorFrom: path})
	if err != nil || len(floor) != 1 || floor[0].Seconds != 548 {
		t.Errorf("floor %+v, %v; want the earlier run's", floor, err)
	}
	if _, err := floorFrom(config{parents: 1000, children: 5, floorFrom: path}); err == nil {
		t.Error("the floor of 50,000 parents reused for 1,000")
	}
}
