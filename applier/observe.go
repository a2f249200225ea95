package applier

import (
	"k8s.io/apimachinery/pkg/types"

	"universalcontroller.dev/uc/internal/registry"
	"universalcontroller.dev/uc/schemas/bus"
)

// Observer hears how applies end, e.g. to count them in metrics. m is the
// meta of the reply applied: the parent, and the watcher's observation.
type Observer interface {
	// Applied: the replies of m's observation are applied, the children,
	// the status and the finalizer written.
	Applied(m bus.Meta)
	// Rejected: the reply was rejected whole for reason (the reason of the
	// Warning Event on the parent), nothing of it applied.
	Rejected(m bus.Meta, reason string)
	// Failed: the apply failed and is retried.
	Failed(m bus.Meta)
}

// observer is Options.Observer, or nobody.
func (a *Applier) observer() Observer {
	if a.opts.Observer == nil {
		return nobody{}
	}
	return a.opts.Observer
}

type nobody struct{}

func (nobody) Applied(bus.Meta)          {}
func (nobody) Rejected(bus.Meta, string) {}
func (nobody) Failed(bus.Meta)           {}

// rolloutProgress is where a parent's rolling children are after its last
// rollout step: on its latest revision (moved) or on older ones.
type rolloutProgress struct {
	controller    string
	latest, older int
}

// rolled records the parent's progress after a rollout step, until every
// child is on the latest revision.
func (p *partition) rolled(uid types.UID, ctl *registry.Controller, ro *rollout) {
	progress := rolloutProgress{controller: ctl.Name}
	for _, rev := range ro.revs {
		n := len(ro.onRevision(ctl, rev))
		if rev == ro.latest {
			progress.latest += n
		} else {
			progress.older += n
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if progress.older == 0 {
		delete(p.rolling, uid)
	} else {
		p.rolling[uid] = progress
	}
}

// Rollouts are the rollouts in progress of one controller's parents in the
// partitions a replica holds.
type Rollouts struct {
	// Parents whose children are not all on their latest revision.
	Parents int
	// Children of those parents on their latest revision, and on older
	// ones: Latest / (Latest + Older) is how far they rolled.
	Latest, Older int
}

// Rollouts are the rollouts in progress in the partitions this replica
// holds, by controller, as their last steps left them.
func (a *Applier) Rollouts() map[string]Rollouts {
	out := map[string]Rollouts{}
	for _, p := range a.heldPartitions() {
		p.mu.Lock()
		for _, progress := range p.rolling {
			r := out[progress.controller]
			r.Parents++
			r.Latest += progress.latest
			r.Older += progress.older
			out[progress.controller] = r
		}
		p.mu.Unlock()
	}
	return out
}

// PartitionParents are, for each partition this replica holds, the
// parents it knows in it: those it applied, or read the fence of, since it
// took the partition.
func (a *Applier) PartitionParents() map[int]int {
	out := map[int]int{}
	for _, p := range a.heldPartitions() {
		p.mu.Lock()
		out[p.n] = len(p.fenced)
		p.mu.Unlock()
	}
	return out
}
