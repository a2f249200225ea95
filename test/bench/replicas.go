package main

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/apimachinery/pkg/types"

	"universalcontroller.dev/uc/schemas/bus"
)

// The applier replicas' partition ownership (bus.AppliersBucket holds a key
// per live replica, bus.PartitionsBucket a key per partition held, valued
// with the holder's id). The bench runs uc with the default number of
// partitions.
const (
	partitions = bus.DefaultPartitions
	// balanced is how long the partitions' owners must stay the same for the
	// appliers to count as done sharing them out: two of their balancing
	// rounds (every 5 s), so a replica that joined was seen by all.
	balanced = 12 * time.Second
)

// replicaShare is what one applier replica holds.
type replicaShare struct {
	// Replica is the applier process's role (applier-1, …), or its replica
	// id if the bench does not know it; "none" for the parents of
	// partitions nobody holds.
	Replica    string `json:"replica"`
	Partitions int    `json:"partitions"`
	Parents    int    `json:"parents"`
}

// awaitPartitions waits until n applier replicas have shared out every
// partition and the owners stayed the same for a while, then learns which
// process is which replica.
func (u *ucProcess) awaitPartitions(ctx context.Context, n int) error {
	if err := u.awaitShares(ctx, "the appliers", n, bus.AppliersBucket, bus.PartitionsBucket); err != nil {
		return err
	}
	u.replicas = map[string]string{}
	for _, p := range u.procs {
		if id := replicaID(p.log); id != "" {
			u.replicas[id] = p.role
		}
	}
	return nil
}

// awaitShares waits until n replicas of a role (who), members of bucket
// members, have shared out every partition, keys of bucket keys, and the
// owners stayed the same for a while.
func (u *ucProcess) awaitShares(ctx context.Context, who string, n int, members, keys string) error {
	var last map[int]string
	var since time.Time
	return waitFor(ctx, 2*time.Minute, who+" to share out the partitions", func(ctx context.Context) (bool, error) {
		if err := u.exited(); err != nil {
			return false, fatalError{err}
		}
		held, err := u.keys(ctx, members)
		if err != nil {
			return false, err
		}
		owners, err := u.owners(ctx, keys)
		if err != nil {
			return false, err
		}
		if len(held) != n || len(owners) != partitions || !maps.Equal(owners, last) {
			last, since = owners, time.Now()
			return false, nil
		}
		return time.Since(since) >= balanced, nil
	}, nil)
}

// keys lists a key-value bucket's keys (none when it has none yet).
func (u *ucProcess) keys(ctx context.Context, bucket string) ([]string, error) {
	kv, err := u.js.KeyValue(ctx, bucket)
	if err != nil {
		return nil, err
	}
	keys, err := kv.Keys(ctx)
	if errors.Is(err, jetstream.ErrNoKeysFound) {
		return nil, nil
	}
	return keys, err
}

// owners reads which replica holds each partition held, from the
// partition-keys bucket.
func (u *ucProcess) owners(ctx context.Context, bucket string) (map[int]string, error) {
	keys, err := u.keys(ctx, bucket)
	if err != nil {
		return nil, err
	}
	kv, err := u.js.KeyValue(ctx, bucket)
	if err != nil {
		return nil, err
	}
	out := map[int]string{}
	for _, k := range keys {
		n, err := bus.ParsePartitionKey(k)
		if err != nil {
			return nil, err
		}
		e, err := kv.Get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue // released meanwhile
		}
		if err != nil {
			return nil, err
		}
		out[n] = string(e.Value())
	}
	return out, nil
}

// replicaID finds an applier's replica id in its log, on the line it logs
// when it starts applying: `msg="applying replies" replica=<id>`.
func replicaID(log string) string {
	f, err := os.Open(log)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if line := sc.Text(); strings.Contains(line, `msg="applying replies"`) {
			_, id, _ := strings.Cut(line, " replica=")
			id, _, _ = strings.Cut(id, " ")
			return id
		}
	}
	return ""
}

// spread counts the partitions and parents each applier replica holds now;
// nil for uc run.
func (u *ucProcess) spread(ctx context.Context, parents []types.UID) ([]replicaShare, error) {
	if u.replicas == nil {
		return nil, nil
	}
	owners, err := u.owners(ctx, bus.PartitionsBucket)
	if err != nil {
		return nil, err
	}
	shares := map[string]*replicaShare{}
	share := func(n int) *replicaShare {
		name := "none"
		if id, ok := owners[n]; ok {
			name = cmp.Or(u.replicas[id], id)
		}
		if shares[name] == nil {
			shares[name] = &replicaShare{Replica: name}
		}
		return shares[name]
	}
	for _, role := range u.replicas {
		shares[role] = &replicaShare{Replica: role} // also a replica holding nothing
	}
	for n := range partitions {
		if _, ok := owners[n]; ok {
			share(n).Partitions++
		}
	}
	for _, uid := range parents {
		share(bus.Partition(uid, partitions)).Parents++
	}
	out := make([]replicaShare, 0, len(shares))
	for _, name := range slices.Sorted(maps.Keys(shares)) {
		out = append(out, *shares[name])
	}
	return out, nil
}

// shares describes a spread for the log: "; parents per replica: applier-1
// 498, applier-2 502" (nothing for uc run).
func shares(spread []replicaShare) string {
	if len(spread) == 0 {
		return ""
	}
	parts := make([]string, len(spread))
	for i, s := range spread {
		parts[i] = fmt.Sprintf("%s %d", s.Replica, s.Parents)
	}
	return "; parents per replica: " + strings.Join(parts, ", ")
}
