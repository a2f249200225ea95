// Package bus is the public contract of the NATS JetStream bus: the names
// of the streams, of the hook consumers and of the buckets, the subjects,
// the CloudEvent types and extension attributes, how a CloudEvent is
// carried in a NATS message (binary mode: ce-* headers, JSON data), and the
// formats of what hooks and tools read (fences, partition keys). How the
// streams, consumers and buckets are configured, and which of uc's roles
// creates, reads and writes each, is internal/topology's.
//
// Subjects put the controller and hook first, then the partition, then the
// parent's UID:
//
//	uc.req.<controller>.<hook>.<partition>.<parent-uid>    hook requests
//	uc.reply.<controller>.<hook>.<partition>.<parent-uid>  hook replies
//	uc.dlq.<controller>.<hook>.<partition>.<parent-uid>    requests no hook could serve
//
// A controller that rolls its children out asks its sync hook once per live
// revision of a parent: the latest revision's messages use the parent's UID as
// the last token, an older revision's use <parent-uid>_<revision-hash>.
//
// Dots in a controller's name become underscores (Kubernetes names never hold
// underscores, so the mapping is one to one).
package bus

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/apimachinery/pkg/types"
)

// Streams.
const (
	// RequestStream holds hook requests. It keeps one message per subject, so
	// the latest observation of a parent replaces a request still waiting.
	RequestStream = "UC_REQUESTS"
	// ReplyStream holds hook replies until an applier has applied them.
	ReplyStream = "UC_REPLIES"
	// DeadLetterStream holds requests that reached their maximum deliveries.
	DeadLetterStream = "UC_DEADLETTER"
)

// Subject prefixes.
const (
	RequestPrefix    = "uc.req"
	ReplyPrefix      = "uc.reply"
	DeadLetterPrefix = "uc.dlq"
)

// DefaultPartitions is the number of partitions parents are spread over.
const DefaultPartitions = 32

// Address is where a parent's messages for one hook live on the bus.
type Address struct {
	Controller string
	Hook       string
	Partition  int
	ParentUID  types.UID
	// Revision is the hash of an older revision the request is for; empty
	// for the latest.
	Revision string
}

// Token makes a name safe as one subject token.
func Token(name string) string { return strings.ReplaceAll(name, ".", "_") }

// Partition spreads parent UIDs over n partitions.
func Partition(uid types.UID, n int) int {
	if n <= 1 {
		return 0
	}
	h := fnv.New32a()
	h.Write([]byte(uid))
	return int(h.Sum32() % uint32(n))
}

// RequestSubject is the subject of the address's hook requests.
func (a Address) RequestSubject() string { return a.subject(RequestPrefix) }

// ReplySubject is the subject of the address's hook replies.
func (a Address) ReplySubject() string { return a.subject(ReplyPrefix) }

// DeadLetterSubject is the subject of the address's dead letters.
func (a Address) DeadLetterSubject() string { return a.subject(DeadLetterPrefix) }

func (a Address) subject(prefix string) string {
	return fmt.Sprintf("%s.%s.%s.%d.%s", prefix, Token(a.Controller), a.Hook, a.Partition, a.parentToken())
}

// parentToken is the per-parent token: one per parent and revision.
func (a Address) parentToken() string {
	if a.Revision == "" {
		return string(a.ParentUID)
	}
	return string(a.ParentUID) + "_" + a.Revision
}

// HookRequests is the filter subject of every request of one controller's hook.
func HookRequests(controller, hook string) string {
	return fmt.Sprintf("%s.%s.%s.>", RequestPrefix, Token(controller), hook)
}

// HookReplies is the filter subject of the replies of one hook, of every
// controller.
func HookReplies(hook string) string { return ReplyPrefix + ".*." + hook + ".>" }

// HookConsumer is the durable consumer shared by every worker serving one
// controller's hook.
func HookConsumer(controller, hook string) string {
	return "hook_" + Token(controller) + "_" + hook
}

// HookInbox is the inbox prefix of a controller's hook workers: a NATS
// user of one controller's hook workers (uc nats-config) receives responses
// there only. The controller token cannot hold a dot, so one controller's
// inboxes are never under another's.
func HookInbox(controller string) string { return "_INBOX.hook_" + Token(controller) }

// SameMessage tells a redelivery of a message from another message.
func SameMessage(a, b jetstream.Msg) bool {
	ma, errA := a.Metadata()
	mb, errB := b.Metadata()
	return errA == nil && errB == nil && ma.Sequence.Stream == mb.Sequence.Stream
}

// ParentSubjects is the filter subject of one parent's messages under
// prefix (RequestPrefix, ReplyPrefix, DeadLetterPrefix) for hook, or for
// every hook when hook is "*", in whatever partition: those about its
// latest revision.
func ParentSubjects(prefix, controller, hook string, uid types.UID) string {
	return fmt.Sprintf("%s.%s.%s.*.%s", prefix, Token(controller), hook, uid)
}

// ControllerSubjects is the filter subject of every message of one
// controller under prefix, or of every controller when controller is "".
func ControllerSubjects(prefix, controller string) string {
	if controller == "" {
		return prefix + ".>"
	}
	return prefix + "." + Token(controller) + ".>"
}

// ResyncPrefix is the prefix of resync requests: core NATS messages (not
// JetStream: a restarted watcher resyncs every parent anyway) asking the
// active watcher to sync one parent again, after a delay or at once, with
// a new request even when nothing changed. The applier sends one for a
// reply's resyncAfterSeconds, `uc resync` one per parent it is asked to
// sync. The body is a Resync; the subject's tokens after the controller are
// not read. A request with a reply subject is answered with a ResyncAnswer
// once the parent is queued.
const ResyncPrefix = "uc.resync"

// ResyncSubject is where a resync request for the parent goes.
func (a Address) ResyncSubject() string { return a.subject(ResyncPrefix) }

// AllResyncs is the filter subject of every resync request.
func AllResyncs() string { return ResyncPrefix + ".>" }

// InspectPrefix is the prefix of the questions `uc trace` and `uc render
// --from-trace` ask the active watcher about a parent: core NATS requests,
// body a Question, answered with a LastPublished. A request leaves the bus
// once answered; the watcher remembers the last one it published for each
// parent. As with a resync request, the tokens after the controller are
// not read.
const InspectPrefix = "uc.inspect"

// InspectSubject is where to ask the watcher about the parent.
func (a Address) InspectSubject() string { return a.subject(InspectPrefix) }

// AllInspects is the filter subject of every question to the watcher.
func AllInspects() string { return InspectPrefix + ".>" }

// Question is the body of a question to the watcher about a parent.
type Question struct {
	// Resource is set for a decorated object (see Meta.Resource).
	Resource  string `json:"resource,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	// Request asks for the parent's request itself (LastPublished.Request).
	Request bool `json:"request,omitempty"`
}

// LastPublished is the watcher's answer about a parent: the last sync or
// finalize request it published for it since it became active (ID empty:
// none), or why it cannot say.
type LastPublished struct {
	ID              string    `json:"id,omitempty"`
	Hook            string    `json:"hook,omitempty"`
	Generation      int64     `json:"generation,omitempty"`
	ResourceVersion string    `json:"resourceVersion,omitempty"`
	Observation     int64     `json:"observation,omitempty"`
	Published       time.Time `json:"published,omitzero"`
	Error           string    `json:"error,omitempty"`
	// Request is the parent's request, when the question asked for it; or
	// RequestProblem says why the watcher has none to give (a decorated
	// object's, one it would not send, one that waits for its customize
	// reply).
	Request        *CurrentRequest `json:"request,omitempty"`
	RequestProblem string          `json:"requestProblem,omitempty"`
}

// CurrentRequest is a parent's sync or finalize request as the watcher
// would publish it now, built from its caches: the watcher keeps no copy
// of the requests it published (one per parent would grow its memory with
// the parents' observed state), but a request is a function of what it
// observed — the controller's generation and every object at its
// resourceVersion — and the id of a published request hashes exactly
// that. So when Published is true, Data is byte for byte the data of the
// last request published (LastPublished.ID). For a controller that rolls
// its children out, it is the latest revision's request.
type CurrentRequest struct {
	Hook            string `json:"hook"`
	Generation      int64  `json:"generation"`
	ResourceVersion string `json:"resourceVersion"`
	// Published: the last request published observed the same; false when
	// the parent, a child or a related object changed since (the watcher
	// publishes this one next).
	Published bool `json:"published"`
	// Data is the request, a hooks.SyncRequest.
	Data json.RawMessage `json:"data"`
}

// ApplyingPrefix is the prefix of apply notices: core NATS messages from an
// applier to the watcher, one when it starts applying a parent's replies and
// one when it is done. Meanwhile the watcher defers the parent's syncs, so
// the writes of one apply give one request, not one per write.
const ApplyingPrefix = "uc.applying"

// ApplyingSubject is where an applier announces applies to the parent.
func (a Address) ApplyingSubject() string { return a.subject(ApplyingPrefix) }

// AllApplying is the filter subject of every apply notice.
func AllApplying() string { return ApplyingPrefix + ".>" }

// Applying is the body of an apply notice.
type Applying struct {
	// Resource is set for a decorated object (see Meta.Resource).
	Resource  string `json:"resource,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	// Done is false when the apply starts, true when it ended.
	Done bool `json:"done"`
	// Wrote, when the apply ended, is what it wrote to the parent and its
	// children: the watcher syncs the parent again once its caches have
	// seen each write, so that the next request observes all of them at
	// once, not each as its watch event comes (a controller's
	// expectations, as Kubernetes' own ReplicaSet controller keeps them).
	Wrote []Written `json:"wrote,omitempty"`
}

// Written is one object an apply wrote.
type Written struct {
	Group     string `json:"group,omitempty"`
	Version   string `json:"version"`
	Resource  string `json:"resource"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	// ResourceVersion is the object's once written; empty for a delete.
	ResourceVersion string `json:"resourceVersion,omitempty"`
	// Deleted is the UID of the object a delete removed.
	Deleted string `json:"deleted,omitempty"`
}

// Resync is the body of a resync request.
type Resync struct {
	// Resource is set for a decorated object (see Meta.Resource).
	Resource     string  `json:"resource,omitempty"`
	Namespace    string  `json:"namespace,omitempty"`
	Name         string  `json:"name"`
	AfterSeconds float64 `json:"afterSeconds"`
}

// ResyncAnswer is the watcher's answer to a resync request that has a reply
// subject: an empty Error once the parent is queued.
type ResyncAnswer struct {
	// Error says why the parent was not queued: its controller is not
	// registered with this watcher, or the request is not a Resync.
	Error string `json:"error,omitempty"`
}

// ControllerOf returns the controller token of a uc subject, with its dots
// restored.
func ControllerOf(subject string) (string, bool) {
	parts := strings.SplitN(subject, ".", 4)
	if len(parts) < 4 {
		return "", false
	}
	return strings.ReplaceAll(parts[2], "_", "."), true
}

// PartitionReplies is the filter subject of the replies of one hook in one
// partition, of every controller.
func PartitionReplies(hook string, partition int) string {
	return fmt.Sprintf("%s.*.%s.%d.>", ReplyPrefix, hook, partition)
}
