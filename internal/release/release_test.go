package release

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"universalcontroller.dev/uc/internal/version"
)

func TestParsePlatform(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Platform
		ok   bool
	}{
		{"linux/amd64", Platform{"linux", "amd64"}, true},
		{"darwin/arm64", Platform{"darwin", "arm64"}, true},
		{"linux", Platform{}, false},
		{"linux/", Platform{}, false},
		{"/amd64", Platform{}, false},
		{"linux/arm/v7", Platform{}, false},
	} {
		got, err := ParsePlatform(tc.in)
		if got != tc.want || (err == nil) != tc.ok {
			t.Errorf("ParsePlatform(%q) = %v, %v; want %v, ok %t", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

// TestDescribe: the version of a commit, in a real git repository: the
// release at its tag, a snapshot otherwise or with changes, an error at
// another version's tag.
func TestDescribe(t *testing.T) {
	dir := t.TempDir()
	gitIn := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=uc", "GIT_AUTHOR_EMAIL=uc@example.com", "GIT_COMMITTER_NAME=uc",
			"GIT_COMMITTER_EMAIL=uc@example.com", "GIT_COMMITTER_DATE=2026-07-01T12:00:00+02:00")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	gitIn("init", "-q")
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("1"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitIn("add", "f")
	gitIn("commit", "-q", "-m", "one")
	commit, err := git(t.Context(), dir, "rev-parse", "HEAD")
	if err != nil {
		t.Fatal(err)
	}
	check := func(name, want string, modified bool) {
		t.Helper()
		s, err := Describe(t.Context(), dir)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if s.Version != want || s.Commit != commit || s.Modified != modified || !s.Time.Equal(time.Date(2026, 7, 1, 10, 0, 0, 0, time.UTC)) || s.Time.Location() != time.UTC {
			t.Errorf("%s: %+v; want version %s, commit %s, modified %t, time 2026-07-01T10:00:00Z", name, s, want, commit, modified)
		}
	}
	check("untagged", version.Snapshot(commit, false), false)
	gitIn("tag", version.Tag)
	check("tagged", version.Release, false)
	gitIn("tag", "not-a-version")
	check("tagged with the release and another name", version.Release, false)
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("2"), 0o644); err != nil {
		t.Fatal(err)
	}
	check("tagged, with changes", version.Snapshot(commit, true), true)
	gitIn("tag", "v99.0.0")
	if _, err := Describe(t.Context(), dir); err == nil || !strings.Contains(err.Error(), "v99.0.0") {
		t.Errorf("a commit tagged v99.0.0 described without an error naming it: %v", err)
	}
}

// TestImageReproducible: the image of the same binaries and source has the
// same digest, and a different one for another commit time or binary.
func TestImageReproducible(t *testing.T) {
	dir := t.TempDir()
	bins := map[Platform]string{}
	for _, p := range []Platform{{"linux", "amd64"}, {"linux", "arm64"}} {
		bins[p] = filepath.Join(dir, p.Arch)
		if err := os.WriteFile(bins[p], []byte("binary for "+p.String()), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	src := Source{Version: "1.2.3", Commit: strings.Repeat("a", 40), Time: time.Date(2026, 7, 1, 10, 0, 0, 0, time.UTC)}
	digest := func(bins map[Platform]string, src Source) string {
		t.Helper()
		idx, err := Image(bins, src)
		if err != nil {
			t.Fatal(err)
		}
		d, err := idx.Digest()
		if err != nil {
			t.Fatal(err)
		}
		return d.String()
	}
	first := digest(bins, src)
	if again := digest(bins, src); again != first {
		t.Errorf("the same binaries and source made digests %s and %s", first, again)
	}
	later := src
	later.Time = later.Time.Add(time.Second)
	if d := digest(bins, later); d == first {
		t.Error("another commit time made the same digest")
	}
	if err := os.WriteFile(bins[Platform{"linux", "arm64"}], []byte("another binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	if d := digest(bins, src); d == first {
		t.Error("another binary made the same digest")
	}
	if _, err := Image(nil, src); err == nil {
		t.Error("an image of no binary built")
	}
}
