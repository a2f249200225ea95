package shares

import (
	"fmt"
	"testing"
)

// TestAssign: every partition has one owner, every member holds its share
// (the floor or the ceiling of partitions / members), the result does not
// depend on the order members are listed in, and a member joining takes
// about its share, moving few partitions between the others.
func TestAssign(t *testing.T) {
	for _, tc := range []struct {
		members, partitions int
		// maxOther bounds the partitions that move between old members
		// when the last member joins (2000 random trials: at most 4, 6, 5
		// with 3, 4, 5 members and 32 partitions).
		maxOther int
	}{
		{1, 32, 0},
		{2, 32, 0},
		{3, 32, 6},
		{4, 32, 6},
		{5, 32, 6},
		{3, 8, 3},
		{40, 32, 2}, // more members than partitions: some hold none
	} {
		t.Run(fmt.Sprintf("%d members %d partitions", tc.members, tc.partitions), func(t *testing.T) {
			for trial := range 50 {
				members := make([]string, tc.members)
				for i := range members {
					members[i] = fmt.Sprintf("uc-applier-%d_%08x", trial, uint32(trial*7919+i*104729))
				}
				got := assign(members, tc.partitions)
				if len(got) != tc.partitions {
					t.Fatalf("%d of %d partitions assigned: %v", len(got), tc.partitions, got)
				}
				held := map[string]int{}
				for _, m := range got {
					held[m]++
				}
				lo, hi := tc.partitions/tc.members, (tc.partitions+tc.members-1)/tc.members
				for _, m := range members {
					if held[m] < lo || held[m] > hi {
						t.Fatalf("%s holds %d partitions, want %d to %d: %v", m, held[m], lo, hi, held)
					}
				}
				reversed := make([]string, len(members))
				for i, m := range members {
					reversed[len(members)-1-i] = m
				}
				for n, m := range assign(reversed, tc.partitions) {
					if got[n] != m {
						t.Fatalf("partition %d goes to %s or %s depending on the members' order", n, got[n], m)
					}
				}
				before := assign(members[:len(members)-1], tc.partitions)
				other := 0
				for n, m := range got {
					if before[n] != "" && before[n] != m && m != members[len(members)-1] {
						other++
					}
				}
				if other > tc.maxOther {
					t.Fatalf("a member joining moved %d partitions between the others, want at most %d", other, tc.maxOther)
				}
			}
		})
	}
}
