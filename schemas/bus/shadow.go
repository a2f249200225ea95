package bus

import "strings"

// A sync hook's shadow (spec.hooks.sync.shadow) is served as the hook
// hooks.SyncShadow, on subjects and a consumer of its own: the watcher
// publishes a copy of each sync request (the latest revision's) on
// uc.req.<controller>.sync-shadow.<partition>.<parent-uid>, and the
// shadow's replies come back on the matching uc.reply subject, where the
// appliers of the partition take them beside the sync hook's. A work-queue
// stream lets no two consumers share a subject, and a copy gives the shadow
// its own coalescing (one waiting request per parent), retries, dead
// letters and delivery policy: a slow or failing shadow never holds a
// request of the sync hook back.

// shadowSuffix ends the id of a shadow's request.
const shadowSuffix = "-shadow"

// ShadowRequestID is the id of the copy of the sync request of that id
// that the shadow gets. JetStream drops a message whose id the stream took
// in its duplicate window, whatever its subject: the copy's id is the
// request's with a suffix, dropped exactly when the request is.
func ShadowRequestID(id string) string { return id + shadowSuffix }

// ShadowedRequestID is the id of the sync request that the shadow's
// request of that id copies, and whether it is a shadow's.
func ShadowedRequestID(id string) (string, bool) { return strings.CutSuffix(id, shadowSuffix) }
