package dispatchertest

import (
	"context"
	"net/http"
	"testing"

	"github.com/cloudevents/sdk-go/v2/client"
	"github.com/cloudevents/sdk-go/v2/event"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
)

// Function is a function of the shape Knative's func generates for Go: it
// gets a CloudEvent and may answer one.
type Function func(ctx context.Context, e event.Event) (*event.Event, error)

// FunctionHandler serves fn over HTTP with the CloudEvents SDK, as a Knative
// function is served, until the test ends.
func FunctionHandler(t testing.TB, fn Function) http.Handler {
	t.Helper()
	p, err := cehttp.New()
	if err != nil {
		t.Fatal(err)
	}
	h, err := client.NewHTTPReceiveHandler(t.Context(), p, fn)
	if err != nil {
		t.Fatal(err)
	}
	return h
}
