package applier

import (
	"k8s.io/apimachinery/pkg/types"

	"universalcontroller.dev/uc/core"
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

// nobody hears nothing: the default Observer and ShadowObserver.
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
func (k *knownParents) rolled(uid types.UID, ctl *core.Controller, ro *core.Rollout) {
	progress := rolloutProgress{controller: ctl.Name}
	for _, rev := range ro.Revisions {
		n := len(ro.OnRevision(ctl, rev))
		if rev == ro.Latest {
			progress.latest += n
		} else {
			progress.older += n
		}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if progress.older == 0 {
		delete(k.rolling, uid)
	} else {
		k.rolling[uid] = progress
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

// addRollouts adds the rollouts in progress of the partition's parents,
// by controller, to out.
func (k *knownParents) addRollouts(out map[string]Rollouts) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, progress := range k.rolling {
		r := out[progress.controller]
		r.Parents++
		r.Latest += progress.latest
		r.Older += progress.older
		out[progress.controller] = r
	}
}

// count is the number of the partition's parents known: those applied, or
// whose fence was read, since this replica took the partition.
func (k *knownParents) count() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.fenced)
}
