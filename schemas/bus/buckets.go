package bus

import (
	"fmt"
	"strconv"
	"strings"
)

// The appliers' JetStream key-value buckets.
const (
	// FenceBucket remembers, per parent UID, the last reply applied: its
	// Fence.
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

// Fence is what FenceBucket holds for a parent: which reply was applied to
// it last. The appliers apply no reply of an older observation after it;
// the watcher reads it to tell a request that was applied.
type Fence struct {
	// Observation is the reply's (ExtObservation).
	Observation int64
	// Request is the id of the request the reply answered (ExtRequestID),
	// of the parent's latest revision.
	Request string
}

// Value is the fence as a FenceBucket value: "<observation> <request id>".
func (f Fence) Value() []byte {
	return []byte(strconv.FormatInt(f.Observation, 10) + " " + f.Request)
}

// ParseFence reads a FenceBucket value. An older uc's holds the observation
// alone.
func ParseFence(value []byte) (Fence, error) {
	obs, req, _ := strings.Cut(string(value), " ")
	n, err := strconv.ParseInt(obs, 10, 64)
	if err != nil {
		return Fence{}, fmt.Errorf("%s: %q is not a fence", FenceBucket, value)
	}
	return Fence{Observation: n, Request: req}, nil
}
