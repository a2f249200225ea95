package contracttest

import (
	"slices"
	"strings"
	"testing"

	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/hooks"
)

// Building blocks of the invalid documents below.
const (
	ctlJSON    = `{"apiVersion":"universalcontroller.dev/v1alpha1","kind":"UniversalController","metadata":{"name":"foo-controller"}}`
	parentJSON = `{"apiVersion":"samplecontroller.k8s.io/v1alpha1","kind":"Foo","metadata":{"name":"example-foo","namespace":"default"}}`
	childJSON  = `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"example-foo"}}`
)

// syncReq is a sync request with the given children and related maps.
func syncReq(children, related string) string {
	return `{"controller":` + ctlJSON + `,"parent":` + parentJSON +
		`,"children":` + children + `,"related":` + related + `,"finalizing":false}`
}

func TestInvalidDocuments(t *testing.T) {
	var (
		syncRequest       = bus.RequestType(hooks.Sync)
		finalizeRequest   = bus.RequestType(hooks.Finalize)
		syncResponse      = bus.ResponseType(hooks.Sync)
		finalizeResponse  = bus.ResponseType(hooks.Finalize)
		customizeRequest  = bus.RequestType(hooks.Customize)
		customizeResponse = bus.ResponseType(hooks.Customize)
	)
	// The valid documents the cases break, to be sure each case fails for
	// its own reason.
	for typ, doc := range map[string]string{
		syncRequest:       syncReq(`{"Deployment.apps/v1":{"example-foo":`+childJSON+`}}`, `{}`),
		syncResponse:      `{"status":{},"children":[` + childJSON + `],"resyncAfterSeconds":0,"finalized":true}`,
		customizeRequest:  `{"controller":` + ctlJSON + `,"parent":` + parentJSON + `}`,
		customizeResponse: `{"relatedResources":[{"apiVersion":"v1","resource":"configmaps","labelSelector":{"matchExpressions":[{"key":"a","operator":"Exists"}]}}]}`,
	} {
		if err := Validate(typ, []byte(doc)); err != nil {
			t.Fatalf("base %s document: %v", typ, err)
		}
	}

	for _, tc := range []struct {
		name string
		typ  string
		doc  string
		// want is the failure "<instance JSON pointer> <keyword>" that must
		// be among those reported.
		want string
	}{
		// Requests.
		{"not an object", syncRequest, `[]`, " type"},
		{"missing parent", syncRequest,
			`{"controller":` + ctlJSON + `,"children":{},"related":{},"finalizing":false}`, " required parent"},
		{"missing children", finalizeRequest,
			`{"controller":` + ctlJSON + `,"parent":` + parentJSON + `,"related":{},"finalizing":true}`, " required children"},
		{"parent without metadata", syncRequest,
			`{"controller":` + ctlJSON + `,"parent":{"apiVersion":"v1","kind":"Foo"},"children":{},"related":{},"finalizing":false}`, "/parent required metadata"},
		{"parent without name", syncRequest,
			`{"controller":` + ctlJSON + `,"parent":{"apiVersion":"v1","kind":"Foo","metadata":{"namespace":"x"}},"children":{},"related":{},"finalizing":false}`, "/parent/metadata required name"},
		{"controller is a string", syncRequest,
			`{"controller":"foo-controller","parent":` + parentJSON + `,"children":{},"related":{},"finalizing":false}`, "/controller type"},
		{"finalizing is a string", finalizeRequest,
			`{"controller":` + ctlJSON + `,"parent":` + parentJSON + `,"children":{},"related":{},"finalizing":"true"}`, "/finalizing type"},
		{"child without kind", syncRequest,
			syncReq(`{"Deployment.apps/v1":{"example-foo":{"apiVersion":"apps/v1","metadata":{"name":"example-foo"}}}}`, `{}`),
			"/children/Deployment.apps~1v1/example-foo required kind"},
		{"child with a bad apiVersion", syncRequest,
			syncReq(`{"Deployment.apps/v1":{"example-foo":{"apiVersion":"apps/v1/x","kind":"Deployment","metadata":{"name":"example-foo"}}}}`, `{}`),
			"/children/Deployment.apps~1v1/example-foo/apiVersion pattern"},
		{"group key without apiVersion", syncRequest, syncReq(`{"Deployment":{}}`, `{}`), "/children additionalProperties Deployment"},
		{"group key apiVersion first", syncRequest, syncReq(`{"apps/v1.Deployment":{}}`, `{}`), "/children additionalProperties apps/v1.Deployment"},
		{"bad group key in related", syncRequest, syncReq(`{}`, `{"ConfigMap.v1/core":{}}`), "/related additionalProperties ConfigMap.v1/core"},
		{"group is a list", syncRequest, syncReq(`{"Pod.v1":[]}`, `{}`), "/children/Pod.v1 type"},
		{"object key with two slashes", syncRequest,
			syncReq(`{"Deployment.apps/v1":{"a/b/c":`+childJSON+`}}`, `{}`), "/children/Deployment.apps~1v1 additionalProperties a/b/c"},
		{"related object is null", syncRequest, syncReq(`{}`, `{"ConfigMap.v1":{"settings":null}}`), "/related/ConfigMap.v1/settings type"},
		{"customize request without controller", customizeRequest, `{"parent":` + parentJSON + `}`, " required controller"},
		{"customize request, parent without kind", customizeRequest,
			`{"controller":` + ctlJSON + `,"parent":{"apiVersion":"v1","metadata":{"name":"p"}}}`, "/parent required kind"},

		// Responses.
		{"children not an array", syncResponse, `{"children":{"example-foo":` + childJSON + `}}`, "/children type"},
		{"children missing", syncResponse, `{"status":{"availableReplicas":2}}`, " required children"},
		{"reply child without kind", syncResponse,
			`{"children":[` + childJSON + `,{"apiVersion":"apps/v1","metadata":{"name":"b"}}]}`, "/children/1 required kind"},
		{"child without metadata.name", finalizeResponse,
			`{"children":[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"generateName":"x-"}}]}`, "/children/0/metadata required name"},
		{"child with empty name", syncResponse,
			`{"children":[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":""}}]}`, "/children/0/metadata/name minLength"},
		{"child is null", syncResponse, `{"children":[null]}`, "/children/0 type"},
		{"child label not a string", syncResponse,
			`{"children":[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","labels":{"replicas":2}}}]}`,
			"/children/0/metadata/labels/replicas type"},
		{"negative resyncAfterSeconds", syncResponse, `{"children":[],"resyncAfterSeconds":-1}`, "/resyncAfterSeconds minimum"},
		{"resyncAfterSeconds a string", syncResponse, `{"children":[],"resyncAfterSeconds":"30"}`, "/resyncAfterSeconds type"},
		{"status a list", syncResponse, `{"children":[],"status":[]}`, "/status type"},
		{"finalized a string", finalizeResponse, `{"children":[],"finalized":"yes"}`, "/finalized type"},
		{"event type", syncResponse, `{"children":[],"events":[{"type":"Info","reason":"Hello"}]}`, "/events/0/type enum"},
		{"event without reason", syncResponse, `{"children":[],"events":[{"type":"Normal","message":"x"}]}`, "/events/0 required reason"},
		{"empty event reason", syncResponse, `{"children":[],"events":[{"type":"Normal","reason":""}]}`, "/events/0/reason minLength"},
		{"event message too long", finalizeResponse,
			`{"children":[],"events":[{"type":"Normal","reason":"Big","message":"` + strings.Repeat("m", hooks.MaxEventMessage+1) + `"}]}`, "/events/0/message maxLength"},
		{"too many events", syncResponse, `{"children":[],"events":[` +
			strings.TrimSuffix(strings.Repeat(`{"type":"Normal","reason":"R"},`, hooks.MaxEvents+1), ",") + `]}`, "/events maxItems"},
		{"condition status", syncResponse, `{"children":[],"conditions":[{"type":"Ready","status":"Yes","reason":"Up"}]}`, "/conditions/0/status enum"},
		{"condition without reason", syncResponse, `{"children":[],"conditions":[{"type":"Ready","status":"True"}]}`, "/conditions/0 required reason"},
		{"condition reason with spaces", syncResponse, `{"children":[],"conditions":[{"type":"Ready","status":"True","reason":"all up"}]}`,
			"/conditions/0/reason pattern"},
		{"uc's Synced condition", syncResponse, `{"children":[],"conditions":[{"type":"Synced","status":"True","reason":"Mine"}]}`,
			"/conditions/0/type not"},
		{"condition with a time", syncResponse,
			`{"children":[],"conditions":[{"type":"Ready","status":"True","reason":"Up","lastTransitionTime":"2026-01-01T00:00:00Z"}]}`,
			"/conditions/0 additionalProperties lastTransitionTime"},
		{"relatedResources an object", customizeResponse, `{"relatedResources":{}}`, "/relatedResources type"},
		{"rule without resource", customizeResponse, `{"relatedResources":[{"apiVersion":"v1"}]}`, "/relatedResources/0 required resource"},
		{"rule names a string", customizeResponse,
			`{"relatedResources":[{"apiVersion":"v1","resource":"secrets","names":"a"}]}`, "/relatedResources/0/names type"},
		{"bad selector operator", customizeResponse,
			`{"relatedResources":[{"apiVersion":"v1","resource":"pods","labelSelector":{"matchExpressions":[{"key":"a","operator":"Equals"}]}}]}`,
			"/relatedResources/0/labelSelector/matchExpressions/0/operator enum"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Validate(tc.typ, []byte(tc.doc))
			if err == nil {
				t.Fatalf("valid; want failure %q\ndata: %s", tc.want, tc.doc)
			}
			t.Log(err)
			got := failures(err)
			if !slices.Contains(got, tc.want) {
				t.Errorf("failures %q, want %q among them\n%v", got, tc.want, err)
			}
		})
	}
}

func TestValidateRejectsWhatIsNotOneJSONValue(t *testing.T) {
	for _, data := range []string{``, `{`, `{"children":[]} {}`, `{"children":[]}x`} {
		if err := Validate(bus.ResponseType(hooks.Sync), []byte(data)); err == nil || failures(err) != nil {
			t.Errorf("%q: err %v, want a decoding error", data, err)
		}
	}
	if err := Validate("dev.universalcontroller.sync", []byte(`{}`)); err == nil || !strings.Contains(err.Error(), "no JSON Schema") {
		t.Errorf("unknown type: err %v", err)
	}
}
