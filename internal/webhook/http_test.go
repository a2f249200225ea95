package webhook

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"universalcontroller.dev/uc/sdk/go/hook"
)

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		header string
		want   time.Duration
	}{
		{"3", 3 * time.Second},
		{" 120 ", 2 * time.Minute},
		{"0", 0},
		{"-5", 0},
		{"Thu, 01 Jan 2026 12:00:30 GMT", 30 * time.Second},
		{"Thu, 01 Jan 2026 11:59:00 GMT", 0}, // past
		{"soon", 0},
		{"", 0},
	} {
		if got := retryAfter(tc.header, now); got != tc.want {
			t.Errorf("retryAfter(%q) = %s, want %s", tc.header, got, tc.want)
		}
	}
}

// TestPost: what each response of a hook turns into.
func TestPost(t *testing.T) {
	for _, tc := range []struct {
		name       string
		status     int
		header     map[string]string
		body       string
		etag       string // sent in If-None-Match
		reason     string // "" for a reply
		retryAfter time.Duration
		message    string
	}{
		{name: "ok", status: 200, body: `{"children":[]}`},
		{name: "server error", status: 500, body: "database down\n", reason: hook.ReasonHTTPError, message: `500 Internal Server Error: "database down"`},
		{name: "accepted", status: 202, reason: hook.ReasonHTTPError, message: "202 Accepted without a reply"},
		{name: "too many requests", status: 429, header: map[string]string{"Retry-After": "7"}, reason: hook.ReasonHTTPError, retryAfter: 7 * time.Second, message: "429 Too Many Requests"},
		{name: "too large", status: 200, body: strings.Repeat("x", 65), reason: hook.ReasonInvalidReply, message: "reply larger than 64 bytes"},
		{name: "not modified, unasked", status: 304, reason: hook.ReasonHTTPError, message: "304 Not Modified"},
		{name: "precondition failed, unasked", status: 412, reason: hook.ReasonHTTPError, message: "412 Precondition Failed"},
		{name: "not modified", status: 304, etag: `"1"`},
		{name: "precondition failed", status: 412, etag: `"1"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				for k, v := range tc.header {
					w.Header().Set(k, v)
				}
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL, nil)
			if tc.etag != "" {
				req.Header.Set("If-None-Match", tc.etag)
			}
			_, body, err := post(srv.Client(), req, 64)
			if tc.etag != "" {
				if !errors.Is(err, errNotModified) {
					t.Fatalf("got %q, %v; want errNotModified", body, err)
				}
				return
			}
			if tc.reason == "" {
				if err != nil || string(body) != tc.body {
					t.Fatalf("got %q, %v; want %q", body, err, tc.body)
				}
				return
			}
			var e *hook.Error
			if !errors.As(err, &e) || e.Reason != tc.reason || e.RetryAfter != tc.retryAfter || !strings.Contains(e.Error(), tc.message) {
				t.Fatalf("got %#v (%v), want %s with retry after %s naming %q", e, err, tc.reason, tc.retryAfter, tc.message)
			}
		})
	}
}

func TestJSONReply(t *testing.T) {
	if b, err := jsonReply("application/json", []byte(`{"children":[]}`)); err != nil || string(b) != `{"children":[]}` {
		t.Errorf("valid JSON: %q, %v", b, err)
	}
	for body, want := range map[string]string{
		"":                        "empty reply",
		"<html><body>oops</body>": `reply is not JSON (content type "text/html"): "<html><body>oops</body>"`,
		strings.Repeat("é", 300):  "…",
	} {
		_, err := jsonReply("text/html", []byte(body))
		var e *hook.Error
		if !errors.As(err, &e) || e.Reason != hook.ReasonInvalidReply || !strings.Contains(err.Error(), want) {
			t.Errorf("jsonReply(%.20q) = %v, want InvalidReply naming %q", body, err, want)
		}
	}
}
