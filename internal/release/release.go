// Package release builds a release of uc from the Go toolchain alone, no
// container engine: the uc binaries with their checksums and SBOMs, the
// multi-arch OCI image as an OCI layout tarball and its digest, the
// packaged Helm chart and the packed JavaScript SDK. hack/release is its
// command (make release); test/release checks what it writes.
package release

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"universalcontroller.dev/uc/internal/version"
)

// Platform is an OS and an architecture, as GOOS and GOARCH name them.
type Platform struct{ OS, Arch string }

func (p Platform) String() string { return p.OS + "/" + p.Arch }

// ParsePlatform parses os/arch.
func ParsePlatform(s string) (Platform, error) {
	os, arch, ok := strings.Cut(s, "/")
	if !ok || os == "" || arch == "" || strings.Contains(arch, "/") {
		return Platform{}, fmt.Errorf("platform %q: want os/arch, e.g. linux/amd64", s)
	}
	return Platform{os, arch}, nil
}

// Platforms are what a release builds uc for: the image's Linux servers,
// and the CLI on a Mac.
var Platforms = []Platform{{"linux", "amd64"}, {"linux", "arm64"}, {"darwin", "arm64"}}

// Source is the commit a release is built from and the version it is.
type Source struct {
	Version  string    // version.Release at the release's tag, else a snapshot version
	Commit   string    // the full commit hash
	Time     time.Time // the commit's time, UTC: the image's creation time
	Modified bool      // the working tree has changes
}

// Describe reads the commit of the repository at root and says what
// version a release of it is: version.Release if the commit is tagged
// version.Tag and the working tree is clean, else a snapshot
// (version.Snapshot). A commit tagged with another version is an error:
// internal/version must say the tag's version.
func Describe(ctx context.Context, root string) (Source, error) {
	commit, err := git(ctx, root, "rev-parse", "HEAD")
	if err != nil {
		return Source{}, err
	}
	when, err := git(ctx, root, "show", "-s", "--format=%cI", "HEAD")
	if err != nil {
		return Source{}, err
	}
	t, err := time.Parse(time.RFC3339, when)
	if err != nil {
		return Source{}, fmt.Errorf("the commit's time %q: %w", when, err)
	}
	status, err := git(ctx, root, "status", "--porcelain")
	if err != nil {
		return Source{}, err
	}
	tags, err := git(ctx, root, "tag", "--points-at", "HEAD", "v*")
	if err != nil {
		return Source{}, err
	}
	s := Source{Commit: commit, Time: t.UTC(), Modified: status != ""}
	tagged := false
	for tag := range strings.FieldsSeq(tags) {
		if tag != version.Tag {
			return Source{}, fmt.Errorf("commit %s is tagged %s, but internal/version says %s: set version.Release to the tag's version", commit, tag, version.Release)
		}
		tagged = true
	}
	s.Version = version.Snapshot(commit, s.Modified)
	if tagged && !s.Modified {
		s.Version = version.Release
	}
	return s, nil
}

// Names are the file names of a release's artefacts.
type Names struct{ Version string }

// Binary is uc for p.
func (n Names) Binary(p Platform) string { return "uc-" + n.Version + "-" + p.OS + "-" + p.Arch }

// SBOM is the CycloneDX SBOM (JSON) of the binary for p.
func (n Names) SBOM(p Platform) string { return n.Binary(p) + ".cdx.json" }

// Image is the image's OCI layout, a tar archive.
func (n Names) Image() string { return "uc-" + n.Version + "-image.oci.tar" }

// ImageDigest holds the digest of the image's index.
func (n Names) ImageDigest() string { return "uc-" + n.Version + "-image.digest" }

// Chart is the packaged Helm chart, as helm package names it.
func (n Names) Chart() string { return "uc-" + n.Version + ".tgz" }

// JSSDK is the packed JavaScript SDK, as npm pack names it.
func (n Names) JSSDK() string { return "universalcontroller-worker-" + n.Version + ".tgz" }

// Checksums is the SHA-256 sums of the other files, as sha256sum prints
// them (sha256sum -c SHA256SUMS checks them).
func (Names) Checksums() string { return "SHA256SUMS" }

// Options say what to build from where.
type Options struct {
	Root      string     // the repository's root
	Out       string     // the directory the artefacts are written to
	Platforms []Platform // uc's platforms; the image has the Linux ones
	Log       *slog.Logger
}

// cycloneDXGomod makes the SBOMs: from a binary's build information, the
// modules (and Go standard library) linked into it.
const cycloneDXGomod = "github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod@v1.10.0"

// Build builds a release of the commit at o.Root into o.Out, and says
// what it built.
func Build(ctx context.Context, o Options) (Source, error) {
	log := cmp.Or(o.Log, slog.Default())
	src, err := Describe(ctx, o.Root)
	if err != nil {
		return Source{}, err
	}
	log.Info("building a release", "version", src.Version, "commit", src.Commit, "platforms", o.Platforms)
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return Source{}, fmt.Errorf("output directory: %w", err)
	}
	if entries, err := os.ReadDir(o.Out); err != nil || len(entries) > 0 {
		return Source{}, fmt.Errorf("output directory %s: not empty (%v): remove it first", o.Out, err)
	}
	if !slices.ContainsFunc(o.Platforms, func(p Platform) bool { return p.OS == "linux" }) {
		return Source{}, errNoLinux
	}
	n := Names{src.Version}
	images := map[Platform]string{}
	for _, p := range o.Platforms {
		bin := filepath.Join(o.Out, n.Binary(p))
		if err := buildBinary(ctx, o.Root, src, p, bin); err != nil {
			return Source{}, err
		}
		if err := run(ctx, o.Root, nil, "go", "run", cycloneDXGomod, "bin", "-json", "-std", "-noserial", "-notimestamp",
			"-version", "v"+src.Version, "-output", filepath.Join(o.Out, n.SBOM(p)), bin); err != nil {
			return Source{}, fmt.Errorf("SBOM of %s: %w", bin, err)
		}
		if p.OS == "linux" {
			images[p] = bin
		}
		log.Info("built uc", "platform", p, "binary", bin)
	}
	idx, err := Image(images, src)
	if err != nil {
		return Source{}, err
	}
	digest, err := WriteLayout(idx, src, filepath.Join(o.Out, n.Image()))
	if err != nil {
		return Source{}, err
	}
	if err := os.WriteFile(filepath.Join(o.Out, n.ImageDigest()), []byte(digest+"\n"), 0o644); err != nil {
		return Source{}, fmt.Errorf("image digest: %w", err)
	}
	log.Info("built the image", "digest", digest)
	if err := PackageChart(filepath.Join(o.Root, "deploy", "helm", "uc"), src, filepath.Join(o.Out, n.Chart())); err != nil {
		return Source{}, err
	}
	if err := packJSSDK(ctx, filepath.Join(o.Root, "sdk", "js"), src.Version, o.Out); err != nil {
		return Source{}, err
	}
	if err := writeChecksums(o.Out, n); err != nil {
		return Source{}, err
	}
	log.Info("release written", "version", src.Version, "dir", o.Out)
	return src, nil
}

// buildBinary builds uc for p into out: static (CGO_ENABLED=0),
// reproducible (-trimpath, no version control stamp but the version,
// commit and time src says), stripped.
func buildBinary(ctx context.Context, root string, src Source, p Platform, out string) error {
	ldflags := "-s -w " + version.LinkerFlags(src.Version, src.Commit, src.Time.Format(time.RFC3339))
	env := []string{"CGO_ENABLED=0", "GOOS=" + p.OS, "GOARCH=" + p.Arch, "GOAMD64=v1", "GOARM64=v8.0", "GOFLAGS=-mod=readonly"}
	if err := run(ctx, root, env, "go", "build", "-trimpath", "-buildvcs=false", "-ldflags", ldflags, "-o", out, "./cmd/uc"); err != nil {
		return fmt.Errorf("build uc for %s: %w", p, err)
	}
	return nil
}

// git runs git in dir and returns its output, trimmed.
func git(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}

// run runs a command in dir with env added to the environment; its output
// is in the error if it fails.
func run(ctx context.Context, dir string, env []string, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, out)
	}
	return nil
}

// errNoLinux: the image needs a Linux binary.
var errNoLinux = errors.New("no linux platform: the image needs one")
