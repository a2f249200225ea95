package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// TestAuthorized: a request without a token the authenticator accepts is
// 401, one whose user may not get the path 403, one whose user may 200;
// the authorizer is asked about the request's path and lower-case verb.
func TestAuthorized(t *testing.T) {
	authn := authenticator.RequestFunc(func(r *http.Request) (*authenticator.Response, bool, error) {
		switch r.Header.Get("Authorization") {
		case "Bearer reader", "Bearer nobody":
			return &authenticator.Response{User: &user.DefaultInfo{Name: strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")}}, true, nil
		case "":
			return nil, false, nil
		}
		return nil, false, io.ErrUnexpectedEOF // as a rejected token
	})
	var asked []authorizer.Attributes
	authz := authorizer.AuthorizerFunc(func(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
		asked = append(asked, a)
		if a.GetUser().GetName() == "reader" && a.GetPath() == "/metrics" && a.GetVerb() == "get" && !a.IsResourceRequest() {
			return authorizer.DecisionAllow, "", nil
		}
		return authorizer.DecisionNoOpinion, "no rule", nil
	})
	h := authorized(authn, authz, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "metrics") }), discardLog)
	for _, tc := range []struct {
		token, path string
		want        int
	}{
		{"", "/metrics", http.StatusUnauthorized},
		{"forged", "/metrics", http.StatusUnauthorized},
		{"nobody", "/metrics", http.StatusForbidden},
		{"reader", "/debug/pprof/", http.StatusForbidden},
		{"reader", "/metrics", http.StatusOK},
	} {
		r := httptest.NewRequest(http.MethodGet, tc.path, nil)
		if tc.token != "" {
			r.Header.Set("Authorization", "Bearer "+tc.token)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != tc.want {
			t.Errorf("token %q, %s: %d %s, want %d", tc.token, tc.path, w.Code, w.Body, tc.want)
		}
		if tc.want == http.StatusOK && w.Body.String() != "metrics" {
			t.Errorf("token %q: body %q, want the handler's", tc.token, w.Body)
		}
	}
	if len(asked) != 3 {
		t.Errorf("the authorizer was asked %d times, want 3 (the authenticated requests)", len(asked))
	}
}

// discardLog is a logger of nothing.
var discardLog = slog.New(slog.DiscardHandler)
