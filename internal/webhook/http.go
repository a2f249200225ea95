package webhook

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/propagation"

	"universalcontroller.dev/uc/sdk/go/hook"
)

// ReasonInvalidHookConfig is the failure reason of a hook whose spec cannot
// be served as it is: no URL, a missing Secret, a bad certificate…
const ReasonInvalidHookConfig = "InvalidHookConfig"

// errNotModified is a 304 Not Modified or 412 Precondition Failed answer to
// a request with If-None-Match: the reply is the one with that ETag.
var errNotModified = errors.New("not modified")

// post sends one hook request and returns the body of its 200 response,
// read up to limit bytes. A request with If-None-Match may get
// errNotModified. Any other status is an HTTPError naming it; a 429
// carries its Retry-After.
func post(client *http.Client, req *http.Request, limit int64) (http.Header, []byte, error) {
	resp, err := client.Do(req)
	if err != nil {
		return nil, nil, &hook.Error{Reason: hook.ReasonHTTPError, Err: err}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, nil, &hook.Error{Reason: hook.ReasonHTTPError, Err: fmt.Errorf("%s %s: read response: %w", req.Method, req.URL.Redacted(), err)}
	}
	switch {
	case (resp.StatusCode == http.StatusNotModified || resp.StatusCode == http.StatusPreconditionFailed) && req.Header.Get("If-None-Match") != "":
		return resp.Header, nil, errNotModified
	case resp.StatusCode == http.StatusAccepted:
		return nil, nil, &hook.Error{Reason: hook.ReasonHTTPError, Err: &StatusError{resp.StatusCode,
			fmt.Errorf("%s %s: %s without a reply: a hook must answer with its reply in a 200 response", req.Method, req.URL.Redacted(), resp.Status)}}
	case resp.StatusCode != http.StatusOK:
		e := &hook.Error{Reason: hook.ReasonHTTPError, Err: &StatusError{resp.StatusCode, fmt.Errorf("%s %s: %s%s", req.Method, req.URL.Redacted(), resp.Status, excerpt(body))}}
		if resp.StatusCode == http.StatusTooManyRequests {
			e.RetryAfter = retryAfter(resp.Header.Get("Retry-After"), time.Now())
		}
		return nil, nil, e
	case int64(len(body)) > limit:
		return nil, nil, &hook.Error{Reason: hook.ReasonInvalidReply, Err: fmt.Errorf("%s %s: reply larger than %d bytes", req.Method, req.URL.Redacted(), limit)}
	}
	return resp.Header, body, nil
}

// traced is rt with a span for each call of a hook, under the hook call's
// span (the worker's), whose trace context goes with the request as a
// traceparent header: a webhook that traces continues the trace.
func traced(rt http.RoundTripper) http.RoundTripper {
	return otelhttp.NewTransport(rt, otelhttp.WithPropagators(propagation.TraceContext{}))
}

// retryAfter reads a Retry-After header: delay-seconds or an HTTP date.
// Anything else, or a time already past, is 0.
func retryAfter(v string, now time.Time) time.Duration {
	if s, err := strconv.Atoi(strings.TrimSpace(v)); err == nil {
		return time.Duration(max(s, 0)) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0)
	}
	return 0
}

// jsonReply checks that a reply is a JSON document.
func jsonReply(contentType string, body []byte) ([]byte, error) {
	if json.Valid(body) {
		return body, nil
	}
	if len(body) == 0 {
		return nil, &hook.Error{Reason: hook.ReasonInvalidReply, Err: errors.New("empty reply")}
	}
	return nil, &hook.Error{Reason: hook.ReasonInvalidReply, Err: fmt.Errorf("reply is not JSON (content type %q)%s", contentType, excerpt(body))}
}

// excerpt quotes the start of a response body for an error message.
func excerpt(body []byte) string {
	const maxLen = 200
	s := strings.TrimSpace(string(body))
	if s == "" {
		return ""
	}
	if len(s) > maxLen {
		s = s[:maxLen]
		for !utf8.ValidString(s) {
			s = s[:len(s)-1]
		}
		s += "…"
	}
	return ": " + strconv.Quote(s)
}

// StatusError is a hook's answer with a status other than 200.
type StatusError struct {
	Code int
	err  error
}

func (e *StatusError) Error() string { return e.err.Error() }

func (e *StatusError) Unwrap() error { return e.err }
