package bus

import (
	"fmt"
	"strconv"
	"strings"
)

// uc's JetStream key-value buckets: the appliers', and those of the
// watchers when they share the partitions.
const (
	// FenceBucket remembers, per parent UID, the last reply applied: its
	// Fence.
	FenceBucket = "uc_fence"
	// AppliersBucket holds a key per live applier replica, its heartbeat.
	AppliersBucket = "uc_appliers"
	// PartitionsBucket holds the key PartitionKey(n) of every partition an
	// applier replica holds, valued with the replica's id.
	PartitionsBucket = "uc_partitions"
	// WatchersBucket holds a key per live watcher replica, its heartbeat.
	WatchersBucket = "uc_watchers"
	// WatcherPartitionsBucket holds the key PartitionKey(n) of every
	// partition a watcher replica holds, valued with the replica's id.
	WatcherPartitionsBucket = "uc_watcher_partitions"
)

// PartitionKey is the key of partition n in PartitionsBucket and
// WatcherPartitionsBucket.
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
// the watcher reads it to tell a request that was applied, and, for a
// parent it has not published for yet (it has just taken over), to chain
// its request ids and to wait until its cache has the parent at least as
// new as the one applied.
type Fence struct {
	// Observation is the reply's (ExtObservation).
	Observation int64
	// Request is the id of the request the reply answered (ExtRequestID),
	// of the parent's latest revision.
	Request string
	// Generation and ResourceVersion are the parent's as that request
	// observed it (ExtGeneration, ExtResourceVersion).
	Generation      int64
	ResourceVersion string
}

// Value is the fence as a FenceBucket value: "<observation> <request id>
// <generation> <resourceVersion>".
func (f Fence) Value() []byte {
	return []byte(strings.Join([]string{strconv.FormatInt(f.Observation, 10), f.Request,
		strconv.FormatInt(f.Generation, 10), f.ResourceVersion}, " "))
}

// ParseFence reads a FenceBucket value. An older uc's holds the observation
// alone, or the observation and the request id, and may hold a clock's
// observation (see observationOf).
func ParseFence(value []byte) (Fence, error) {
	fields := strings.Split(string(value), " ")
	var f Fence
	var err error
	if f.Observation, err = strconv.ParseInt(fields[0], 10, 64); err != nil || len(fields) == 3 || len(fields) > 4 {
		return Fence{}, fmt.Errorf("%s: %q is not a fence", FenceBucket, value)
	}
	f.Observation = observationOf(f.Observation)
	if len(fields) > 1 {
		f.Request = fields[1]
	}
	if len(fields) == 4 {
		if f.Generation, err = strconv.ParseInt(fields[2], 10, 64); err != nil {
			return Fence{}, fmt.Errorf("%s: %q is not a fence", FenceBucket, value)
		}
		f.ResourceVersion = fields[3]
	}
	return f, nil
}

// clockEra is where the observations of an older uc begin: it stamped
// them with its wall clock in nanoseconds (about 1.8e18 in 2026), where uc
// now stamps resourceVersions (etcd's revisions, far below).
const clockEra = 1 << 52

// observationOf is an observation as uc orders them now: an older uc's
// clock stamp counts as 0, older than any, so that a fence or a request
// left by an older uc never holds back the observations of this one.
func observationOf(obs int64) int64 {
	if obs >= clockEra {
		return 0
	}
	return obs
}
