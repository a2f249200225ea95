package render

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"universalcontroller.dev/uc/schemas/hooks"
)

// requestJSON renders the request of opts, as the watcher would publish
// it.
func requestJSON(t *testing.T, opts Options) []byte {
	t.Helper()
	b, err := json.Marshal(request(t, opts))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// replay renders a replay of req with opts: its result, with -o json, and
// its output.
func replay(t *testing.T, req []byte, opts Options) (*Result, string) {
	t.Helper()
	in, err := load(t.Context(), opts, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := RunReplay(t.Context(), Replay{Controller: in.ctl, Hook: hooks.Sync, Request: req}, opts, &out, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	if opts.Output != OutputJSON {
		return nil, out.String()
	}
	var r Result
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("output is not a result: %v\n%s", err, out.String())
	}
	return &r, out.String()
}

// TestReplay: a request uc published, replayed, gives the result a render
// of the same parent and observed objects gives: the hook called with the
// request as it is, its reply planned against the children it observed.
// Saved, the request's files render the same request again.
func TestReplay(t *testing.T) {
	opts := thing(hookPy, func(o *Options) { o.Observed = []string{"testdata/observed.yaml"} })
	req := requestJSON(t, opts)
	want, _, err := render(t, opts)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := replay(t, req, opts)
	if plan(got) != plan(want) {
		t.Errorf("replayed plan %s, want %s", plan(got), plan(want))
	}
	if g, w := mustJSON(t, got.Parent.Object["status"]), mustJSON(t, want.Parent.Object["status"]); g != w {
		t.Errorf("replayed status %s, want %s", g, w)
	}
	if len(got.Plan) == 0 || got.Plan[0].Diff == "" || got.Plan[0].Diff != want.Plan[0].Diff {
		t.Errorf("replayed diff %+v, want %+v", got.Plan, want.Plan)
	}

	t.Run("saved", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "saved")
		saving := opts
		saving.Save = dir
		saving.Output = OutputRequest
		if _, out := replay(t, req, saving); out != string(req)+"\n" {
			t.Errorf("-o request printed %s, want the request %s", out, req)
		}
		if _, err := os.Stat(filepath.Join(dir, "request.json")); err != nil {
			t.Fatal(err)
		}
		again := Options{Controller: []string{filepath.Join(dir, "controller.yaml")}, CRDs: []string{"testdata/crd.yaml", filepath.Join(dir, "crds.yaml")},
			Parent: filepath.Join(dir, "parent.yaml"), Observed: []string{filepath.Join(dir, "observed.yaml")},
			Related: []string{filepath.Join(dir, "related.yaml")}, Output: OutputRequest, MaxChildren: 10}
		if got := requestJSON(t, again); !bytes.Equal(got, req) {
			t.Errorf("the saved files render the request\n%s\nwant\n%s", got, req)
		}
	})
	t.Run("a broken hook", func(t *testing.T) {
		in, err := load(t.Context(), opts, &bytes.Buffer{})
		if err != nil {
			t.Fatal(err)
		}
		broken := opts
		broken.Exec = "echo not json"
		err = RunReplay(t.Context(), Replay{Controller: in.ctl, Hook: hooks.Sync, Request: req}, broken, &bytes.Buffer{}, &bytes.Buffer{})
		if err == nil {
			t.Fatal("a hook that answers garbage rendered")
		}
	})
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
