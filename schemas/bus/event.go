package bus

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	ce "github.com/cloudevents/sdk-go/protocol/nats_jetstream/v2"
	"github.com/cloudevents/sdk-go/v2/binding"
	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"k8s.io/apimachinery/pkg/types"
)

// CloudEvent types: one request and one response type per hook.
const typePrefix = "dev.universalcontroller."

// RequestType is the CloudEvent type of a hook's requests.
func RequestType(hook string) string { return typePrefix + hook + ".request" }

// ResponseType is the CloudEvent type of a hook's replies.
func ResponseType(hook string) string { return typePrefix + hook + ".response" }

// FailureType is the CloudEvent type published on a reply subject, in place
// of a reply, when a hook could not be served within the maximum deliveries.
// Its data is a Failure. The applier reports it on the parent.
func FailureType(hook string) string { return typePrefix + hook + ".failure" }

// Failure says why a hook could not be served. It travels on the reply
// subject, as a CloudEvent of type FailureType: once when the first
// delivery of a request failed and it will be tried again (Retrying), so
// that the parent says so at once, and after the request reached its
// maximum deliveries and went to the dead-letter stream.
type Failure struct {
	// Reason is a CamelCase word: Timeout, HTTPError, InvalidReply, WorkerError…
	Reason string `json:"reason"`
	// Message is for humans: the status code, the timeout, the error.
	Message string `json:"message"`
	// Deliveries is how many times the request was tried.
	Deliveries int `json:"deliveries"`
	// Retrying says the request will be tried again: the failure is
	// reported, and a later reply replaces the report.
	Retrying bool `json:"retrying,omitempty"`
}

// CloudEvent extension attributes carried by every request and reply. A
// reply copies them from its request and adds ExtRequestID.
const (
	ExtController      = "uccontroller"
	ExtHook            = "uchook"
	ExtParentUID       = "ucparentuid"
	ExtNamespace       = "ucnamespace"
	ExtName            = "ucname"
	ExtGeneration      = "ucgeneration"
	ExtResourceVersion = "ucresourceversion"
	ExtPartition       = "ucpartition"
	// ExtObservation orders the observations of one parent: a larger value
	// was observed later. It is a resourceVersion: the newest the watcher's
	// caches had heard of (see the watcher's observation). Appliers never
	// let an older one undo a newer one.
	ExtObservation = "ucobservation"
	// ExtObserved is when the watcher observed the parent, RFC 3339 with
	// nanoseconds: for the metrics of latency alone, never for ordering
	// (a clock is not to be trusted across processes; ExtObservation
	// orders). A reply copies it; one without it is not timed.
	ExtObserved = "ucobserved"
	// ExtRequestID, on a reply, is the id of the request it answers.
	ExtRequestID = "ucrequestid"
	// ExtRevision is the hash of the revision of the parent a request is
	// for, set only for controllers that roll their children out.
	ExtRevision = "ucrevision"
	// ExtRevisions lists, comma-separated and latest first, the revisions
	// the sync hook is asked about for the same observation; the applier
	// applies once it has a reply for each.
	ExtRevisions = "ucrevisions"
	// ExtResource, set for a decorator's object only, names the object's
	// resource, "<apiVersion>/<resource>" (e.g. "apps/v1/statefulsets"): a
	// decorator decorates the objects of several resources.
	ExtResource = "ucresource"
	// ExtFailures, on a request, counts the parent's requests in a row
	// that failed (or were lost) before it, since the parent last changed:
	// the request is a retry of a parent whose hook keeps failing, and the
	// watcher's backoff spaces the calls, so a worker tries it once (see
	// docs/protocol.md, "Failures back off"). Absent (0) on other requests.
	ExtFailures = "ucfailures"
)

// Meta is what every event says about the parent it concerns.
type Meta struct {
	Address
	Namespace       string
	Name            string
	Generation      int64
	ResourceVersion string
	Observation     int64
	// Observed is when the watcher observed the parent (ExtObserved),
	// zero if unknown: for latency metrics only.
	Observed time.Time
	// RequestID is set on replies only.
	RequestID string
	// Revisions lists the revisions asked about for this observation, the
	// latest first (rolling controllers only). Address.Revision is empty for
	// the latest one.
	Revisions []string
	// Resource is the decorated object's resource (decorators only, see
	// ExtResource).
	Resource string
	// Failures is the count of failed requests before this one (see
	// ExtFailures).
	Failures int
}

// LatestRevision is the hash of the parent's latest revision, or "".
func (m Meta) LatestRevision() string {
	if len(m.Revisions) == 0 {
		return ""
	}
	return m.Revisions[0]
}

// ThisRevision is the hash of the revision the event is about, or "".
func (m Meta) ThisRevision() string {
	if m.Revision != "" {
		return m.Revision
	}
	return m.LatestRevision()
}

// Key is the parent's namespace/name, for logs.
func (m Meta) Key() string {
	if m.Namespace == "" {
		return m.Name
	}
	return m.Namespace + "/" + m.Name
}

// LogArgs name the parent in a log line: its controller, namespace/name
// and uid, as slog key-value pairs.
func (m Meta) LogArgs() []any {
	return []any{"controller", m.Controller, "parent", m.Key(), "uid", m.ParentUID}
}

// SetOn writes m into the event's extensions.
func (m Meta) SetOn(e *event.Event) {
	e.SetExtension(ExtController, m.Controller)
	e.SetExtension(ExtHook, m.Hook)
	e.SetExtension(ExtParentUID, string(m.ParentUID))
	e.SetExtension(ExtNamespace, m.Namespace)
	e.SetExtension(ExtName, m.Name)
	e.SetExtension(ExtGeneration, strconv.FormatInt(m.Generation, 10))
	e.SetExtension(ExtResourceVersion, m.ResourceVersion)
	e.SetExtension(ExtPartition, strconv.Itoa(m.Partition))
	e.SetExtension(ExtObservation, strconv.FormatInt(m.Observation, 10))
	if !m.Observed.IsZero() {
		e.SetExtension(ExtObserved, m.Observed.UTC().Format(time.RFC3339Nano))
	}
	if m.RequestID != "" {
		e.SetExtension(ExtRequestID, m.RequestID)
	}
	if len(m.Revisions) > 0 {
		e.SetExtension(ExtRevision, m.ThisRevision())
		e.SetExtension(ExtRevisions, strings.Join(m.Revisions, ","))
	}
	if m.Resource != "" {
		e.SetExtension(ExtResource, m.Resource)
	}
	if m.Failures > 0 {
		e.SetExtension(ExtFailures, strconv.Itoa(m.Failures))
	}
}

// MetaOf reads the parent's Meta from an event's extensions.
//
// Its strings are copies: an event read from a NATS message holds its
// attributes as substrings of the message's whole header block (nats.go
// copies the block once), so a Meta's UID kept as a map key, as the
// appliers keep their parents' fences, would keep the block alive — a
// kilobyte per parent.
func MetaOf(e *event.Event) (Meta, error) {
	ext := e.Extensions()
	str := func(name string) string { s, _ := ext[name].(string); return s }
	keep := func(name string) string { return strings.Clone(str(name)) }
	var m Meta
	var err error
	m.Controller, m.Hook = keep(ExtController), keep(ExtHook)
	m.ParentUID = types.UID(keep(ExtParentUID))
	m.Namespace, m.Name = keep(ExtNamespace), keep(ExtName)
	m.ResourceVersion, m.RequestID = keep(ExtResourceVersion), keep(ExtRequestID)
	m.Resource = keep(ExtResource)
	if m.Controller == "" || m.Hook == "" || m.ParentUID == "" || m.Name == "" {
		return m, fmt.Errorf("event %s lacks %s, %s, %s or %s", e.ID(), ExtController, ExtHook, ExtParentUID, ExtName)
	}
	if m.Generation, err = strconv.ParseInt(str(ExtGeneration), 10, 64); err != nil {
		return m, fmt.Errorf("event %s: %s: %w", e.ID(), ExtGeneration, err)
	}
	if m.Partition, err = strconv.Atoi(str(ExtPartition)); err != nil {
		return m, fmt.Errorf("event %s: %s: %w", e.ID(), ExtPartition, err)
	}
	if m.Observation, err = strconv.ParseInt(str(ExtObservation), 10, 64); err != nil {
		return m, fmt.Errorf("event %s: %s: %w", e.ID(), ExtObservation, err)
	}
	m.Observation = observationOf(m.Observation)
	m.Observed = ObservedAt(str(ExtObserved))
	if f := str(ExtFailures); f != "" {
		if m.Failures, err = strconv.Atoi(f); err != nil {
			return m, fmt.Errorf("event %s: %s: %w", e.ID(), ExtFailures, err)
		}
	}
	if revs := keep(ExtRevisions); revs != "" {
		m.Revisions = strings.Split(revs, ",")
		if rev := keep(ExtRevision); rev != m.Revisions[0] {
			m.Revision = rev
		}
	}
	return m, nil
}

// ObservedAt reads an ExtObserved value; zero when it is missing or not
// a time: it only times.
func ObservedAt(v string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}
	}
	return t
}

// MetaOfReply reads a reply's Meta and checks that the reply came on the
// subject its attributes name. A NATS user may publish only on its own
// controller's subjects, so this is what stops a hook worker of one
// controller from passing a reply off as another controller's.
func MetaOfReply(subject string, e *event.Event) (Meta, error) {
	m, err := MetaOf(e)
	if err != nil {
		return m, err
	}
	if want := m.ReplySubject(); subject != want {
		return m, fmt.Errorf("event %s came on %s, but its attributes say %s", e.ID(), subject, want)
	}
	return m, nil
}

// ToMsg encodes a CloudEvent in binary mode as a NATS message on subject:
// its attributes as headers, its data as the body — the event's own bytes,
// not a copy (the encoder would copy them; uc never asks for structured
// mode, whose body would differ).
func ToMsg(ctx context.Context, subject string, e *event.Event) (*nats.Msg, error) {
	header, err := ce.WriteMsg(ctx, binding.ToMessage(e), skipBody{})
	if err != nil {
		return nil, fmt.Errorf("encode event %s: %w", e.ID(), err)
	}
	return &nats.Msg{Subject: subject, Header: header, Data: e.Data()}, nil
}

// skipBody is where ToMsg's encoder writes the body: nowhere.
type skipBody struct{}

func (skipBody) ReadFrom(io.Reader) (int64, error) { return 0, nil }

// FromMsg decodes the CloudEvent carried by a NATS message.
func FromMsg(ctx context.Context, subject string, header nats.Header, data []byte) (*event.Event, error) {
	e, err := binding.ToEvent(ctx, ce.NewMessage(&nats.Msg{Subject: subject, Header: header, Data: data}))
	if err != nil {
		return nil, fmt.Errorf("decode event on %s: %w", subject, err)
	}
	return e, nil
}
