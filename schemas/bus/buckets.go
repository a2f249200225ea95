package bus

import (
	"fmt"
	"strconv"
	"strings"
)

// The appliers' JetStream key-value buckets.
const (
	// FenceBucket remembers, per parent UID, the observation of the last
	// reply applied.
	FenceBucket = "uc_fence"
	// AppliersBucket holds a key per live applier replica, its heartbeat.
	AppliersBucket = "uc_appliers"
	// PartitionsBucket holds the key PartitionKey(n) of every partition an
	// applier replica holds, valued with the replica's id.
	PartitionsBucket = "uc_partitions"
)

// ApplierBuckets are the applier's key-value buckets: membership, partition
// holds, per-parent fence.
var ApplierBuckets = []string{AppliersBucket, PartitionsBucket, FenceBucket}

// PartitionKey is the key of partition n in PartitionsBucket.
func PartitionKey(n int) string { return "p" + strconv.Itoa(n) }

// ParsePartitionKey returns the partition of a PartitionsBucket key.
func ParsePartitionKey(key string) (int, error) {
	digits, ok := strings.CutPrefix(key, "p")
	n, err := strconv.Atoi(digits)
	if !ok || err != nil || n < 0 {
		return 0, fmt.Errorf("%s: %q is not a partition key", PartitionsBucket, key)
	}
	return n, nil
}
