package applier

import (
	"testing"
)

// TestRendezvousSpreads: partitions are spread over members roughly evenly,
// and a member joining moves only the partitions it takes.
func TestRendezvousSpreads(t *testing.T) {
	members := []string{"vm_9c853dd0", "vm_ac62f90c", "vm_72bdf38a"}
	const partitions = 32
	count := map[string]int{}
	before := map[int]string{}
	for n := range partitions {
		before[n] = rendezvous(members[:2], n)
		count[rendezvous(members, n)]++
	}
	for _, m := range members {
		if count[m] < partitions/6 {
			t.Errorf("member %s owns %d of %d partitions: %v", m, count[m], partitions, count)
		}
	}
	for n := range partitions {
		if now := rendezvous(members, n); now != before[n] && now != members[2] {
			t.Errorf("partition %d moved from %s to %s, not to the new member", n, before[n], now)
		}
	}
	t.Logf("spread over 3 members: %v", count)
}
