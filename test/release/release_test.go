// Package release tests uc's release (internal/release, make release):
// what it builds — binaries, checksums, SBOMs, the OCI image, the chart,
// the JavaScript SDK — and that the tree names one version everywhere.
// By default TestRelease builds a linux/amd64 release into a temporary
// directory; make release-check has it check dist/ (-dist), every
// platform.
package release

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"debug/buildinfo"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	ucrelease "universalcontroller.dev/uc/internal/release"
	"universalcontroller.dev/uc/internal/version"
	"universalcontroller.dev/uc/test/helmchart"
	"universalcontroller.dev/uc/test/manifests"
	"universalcontroller.dev/uc/test/testbed"
)

var dist = flag.String("dist", "", "a release directory to check, of every platform (make release-check); without it, the test builds a linux/amd64 release")

const repoRoot = "../.."

// TestRelease builds a release (or takes -dist's) and checks each of its
// artefacts.
func TestRelease(t *testing.T) {
	src, err := ucrelease.Describe(t.Context(), repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	dir, platforms := *dist, ucrelease.Platforms
	if dir == "" {
		dir, platforms = t.TempDir(), []ucrelease.Platform{{OS: "linux", Arch: "amd64"}}
		start := time.Now()
		if _, err := ucrelease.Build(t.Context(), ucrelease.Options{Root: repoRoot, Out: dir, Platforms: platforms}); err != nil {
			t.Fatal(err)
		}
		t.Logf("built release %s for %v in %s", src.Version, platforms, time.Since(start).Round(time.Second))
	}
	n := ucrelease.Names{Version: src.Version}
	if _, err := os.Stat(filepath.Join(dir, n.Checksums())); err != nil || !slices.ContainsFunc(ls(t, dir), func(name string) bool { return strings.Contains(name, src.Version) }) {
		t.Fatalf("%s holds no release %s of this commit (%v): run make release", dir, src.Version, ls(t, dir))
	}
	binaries := map[ucrelease.Platform]string{}
	for _, p := range platforms {
		if p.OS == "linux" {
			binaries[p] = filepath.Join(dir, n.Binary(p))
		}
	}

	t.Run("checksums", func(t *testing.T) { checkChecksums(t, dir, n, platforms) })
	t.Run("binaries", func(t *testing.T) {
		for _, p := range platforms {
			checkBinary(t, filepath.Join(dir, n.Binary(p)), p, src)
		}
	})
	t.Run("SBOMs", func(t *testing.T) {
		for _, p := range platforms {
			checkSBOM(t, filepath.Join(dir, n.SBOM(p)), src)
		}
	})
	t.Run("image", func(t *testing.T) { checkImage(t, dir, n, binaries, src) })
	t.Run("image reproducible", func(t *testing.T) {
		idx, err := ucrelease.Image(binaries, src)
		if err != nil {
			t.Fatal(err)
		}
		again := filepath.Join(t.TempDir(), n.Image())
		digest, err := ucrelease.WriteLayout(idx, src, again)
		if err != nil {
			t.Fatal(err)
		}
		if want := readTrimmed(t, filepath.Join(dir, n.ImageDigest())); digest != want {
			t.Errorf("the image built again from the same binaries has digest %s, the release's %s", digest, want)
		}
		if a, b := sha256Of(t, again), sha256Of(t, filepath.Join(dir, n.Image())); a != b {
			t.Errorf("the OCI layout archive written again differs: sha256 %s, the release's %s", a, b)
		}
	})
	t.Run("chart", func(t *testing.T) { checkChart(t, filepath.Join(dir, n.Chart()), src) })
	t.Run("chart reproducible", func(t *testing.T) {
		again := filepath.Join(t.TempDir(), n.Chart())
		if err := ucrelease.PackageChart(filepath.Join(repoRoot, "deploy", "helm", "uc"), src, again); err != nil {
			t.Fatal(err)
		}
		if a, b := sha256Of(t, again), sha256Of(t, filepath.Join(dir, n.Chart())); a != b {
			t.Errorf("the chart packaged again differs: sha256 %s, the release's %s", a, b)
		}
	})
	t.Run("JavaScript SDK", func(t *testing.T) { checkJSSDK(t, filepath.Join(dir, n.JSSDK()), src) })
}

// checkChecksums: SHA256SUMS lists every other file of the release, once,
// with its sum, and nothing else.
func checkChecksums(t *testing.T, dir string, n ucrelease.Names, platforms []ucrelease.Platform) {
	f, err := os.Open(filepath.Join(dir, n.Checksums()))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	listed := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		if _, dup := listed[name]; !ok || dup || len(sum) != 64 {
			t.Errorf("SHA256SUMS: line %q: want one '<sha256>  <file>' per file", sc.Text())
		}
		listed[name] = sum
	}
	want := []string{n.Image(), n.ImageDigest(), n.Chart(), n.JSSDK()}
	for _, p := range platforms {
		want = append(want, n.Binary(p), n.SBOM(p))
	}
	if got := slices.Sorted(maps.Keys(listed)); !slices.Equal(got, slices.Sorted(slices.Values(want))) {
		t.Errorf("SHA256SUMS lists %q, want %q", got, slices.Sorted(slices.Values(want)))
	}
	for _, name := range ls(t, dir) {
		if name == n.Checksums() {
			continue
		}
		if sum := sha256Of(t, filepath.Join(dir, name)); listed[name] != sum {
			t.Errorf("%s: sha256 %s, SHA256SUMS says %q", name, sum, listed[name])
		}
	}
}

// checkBinary: the binary at path is uc for p, static, built with
// -trimpath, stamped with src, and carries fallback CA roots; the one for
// this machine says src's version.
func checkBinary(t *testing.T, path string, p ucrelease.Platform, src ucrelease.Source) {
	info, err := buildinfo.ReadFile(path)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	for k, want := range map[string]string{"GOOS": p.OS, "GOARCH": p.Arch, "CGO_ENABLED": "0", "-trimpath": "true"} {
		if settings[k] != want {
			t.Errorf("%s: %s=%q, want %q", path, k, settings[k], want)
		}
	}
	// -trimpath leaves -ldflags out of the build information: the stamp is
	// in the binary's data.
	if !bytes.Contains(readFile(t, path), []byte(src.Commit)) {
		t.Errorf("%s: commit %s not stamped in", path, src.Commit)
	}
	if !slices.ContainsFunc(info.Deps, func(m *debug.Module) bool { return m.Path == "golang.org/x/crypto/x509roots/fallback" }) {
		t.Errorf("%s: no fallback CA roots (golang.org/x/crypto/x509roots/fallback) linked in", path)
	}
	if p.OS == runtime.GOOS && p.Arch == runtime.GOARCH {
		checkVersionOutput(t, path, src)
	}
}

// checkVersionOutput: the uc binary at path says src's version and commit.
func checkVersionOutput(t *testing.T, path string, src ucrelease.Source) {
	out, err := exec.CommandContext(t.Context(), path, "version").Output()
	if err != nil {
		t.Fatalf("%s version: %v", path, err)
	}
	first, rest, _ := strings.Cut(string(out), "\n")
	if first != "uc "+src.Version || !strings.HasPrefix(rest, "commit: "+src.Commit) || !strings.Contains(rest, "date:   "+src.Time.Format(time.RFC3339)) {
		t.Errorf("%s version says\n%s\nwant uc %s, commit %s, date %s", path, out, src.Version, src.Commit, src.Time.Format(time.RFC3339))
	}
}

// checkSBOM: the SBOM at path is CycloneDX JSON of uc at src's version,
// listing the modules linked in, client-go among them.
func checkSBOM(t *testing.T, path string, src ucrelease.Source) {
	var bom struct {
		BOMFormat, SpecVersion string
		Metadata               struct {
			Component struct{ Name, Version string }
		}
		Components []struct{ Name, Version, Purl string }
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &bom); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if c := bom.Metadata.Component; bom.BOMFormat != "CycloneDX" || c.Name != "universalcontroller.dev/uc" || c.Version != "v"+src.Version {
		t.Errorf("%s: format %q, component %s %s; want CycloneDX, universalcontroller.dev/uc v%s", path, bom.BOMFormat, c.Name, c.Version, src.Version)
	}
	names := map[string]bool{}
	for _, c := range bom.Components {
		names[c.Name] = c.Version != "" && strings.HasPrefix(c.Purl, "pkg:golang/")
	}
	for _, m := range []string{"k8s.io/client-go", "github.com/nats-io/nats.go", "golang.org/x/crypto/x509roots/fallback", "std"} {
		if !names[m] {
			t.Errorf("%s: no component %s with a version and a Go package URL", path, m)
		}
	}
	t.Logf("%s: CycloneDX %s, %d components", filepath.Base(path), bom.SpecVersion, len(bom.Components))
}

// checkImage: the OCI layout archive holds one image index, named by the
// version, of the digest the release says; an image per Linux platform,
// each the binary alone as /uc, run as 65532, with the OCI labels.
func checkImage(t *testing.T, dir string, n ucrelease.Names, binaries map[ucrelease.Platform]string, src ucrelease.Source) {
	l := untarLayout(t, filepath.Join(dir, n.Image()))
	top, err := l.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	tm, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(tm.Manifests) != 1 || tm.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != src.Version || tm.Manifests[0].MediaType != types.OCIImageIndex {
		t.Fatalf("index.json: %+v; want one OCI image index named %s", tm.Manifests, src.Version)
	}
	digest := tm.Manifests[0].Digest
	if want := readTrimmed(t, filepath.Join(dir, n.ImageDigest())); digest.String() != want {
		t.Errorf("the layout's index has digest %s, %s says %s", digest, n.ImageDigest(), want)
	}
	idx, err := top.ImageIndex(digest)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	labels := ucrelease.Labels(src)
	if !maps.Equal(im.Annotations, labels) {
		t.Errorf("the index's annotations %v, want %v", im.Annotations, labels)
	}
	for _, want := range []string{"org.opencontainers.image.version", "org.opencontainers.image.revision", "org.opencontainers.image.source", "org.opencontainers.image.created"} {
		if labels[want] == "" {
			t.Errorf("no label %s", want)
		}
	}
	var platforms []string
	for _, d := range im.Manifests {
		p := ucrelease.Platform{OS: d.Platform.OS, Arch: d.Platform.Architecture}
		platforms = append(platforms, p.String())
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		c := cfg.Config
		if cfg.OS != p.OS || cfg.Architecture != p.Arch || cfg.Variant != d.Platform.Variant ||
			!slices.Equal(c.Entrypoint, []string{"/uc"}) || len(c.Cmd) != 0 || c.User != "65532:65532" ||
			!maps.Equal(c.Labels, labels) || !cfg.Created.Equal(src.Time) {
			t.Errorf("image %s: config %+v, created %s; want %s, entrypoint /uc, user 65532:65532, labels %v, created %s", p, c, cfg.Created, p, labels, src.Time)
		}
		if mt, _ := img.MediaType(); mt != types.OCIManifestSchema1 {
			t.Errorf("image %s: media type %s, want %s", p, mt, types.OCIManifestSchema1)
		}
		checkLayer(t, img, p, binaries[p], src)
	}
	var want []string
	for p := range binaries {
		want = append(want, p.String())
	}
	slices.Sort(want)
	if !slices.Equal(platforms, want) {
		t.Errorf("the image index has platforms %q, want %q", platforms, want)
	}
}

// checkLayer: img has one layer, holding the binary (its sum the
// release's binary's for p) as /uc, a file owned by root that anyone may
// run; the linux/amd64 one, run, says src's version.
func checkLayer(t *testing.T, img v1.Image, p ucrelease.Platform, binary string, src ucrelease.Source) {
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 1 {
		t.Fatalf("image %s: %d layers, want 1", p, len(layers))
	}
	if mt, _ := layers[0].MediaType(); mt != types.OCILayer {
		t.Errorf("image %s: layer media type %s, want %s", p, mt, types.OCILayer)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var entries []string
	extracted := filepath.Join(t.TempDir(), "uc")
	eachEntry(t, rc, func(h *tar.Header, r io.Reader) {
		entries = append(entries, h.Name)
		if h.Name != "uc" || h.Typeflag != tar.TypeReg || h.Mode != 0o755 || h.Uid != 0 || h.Gid != 0 {
			t.Errorf("image %s: layer entry %s, type %c, mode %o, owner %d:%d; want uc, a regular file, 755, 0:0", p, h.Name, h.Typeflag, h.Mode, h.Uid, h.Gid)
		}
		if err := os.WriteFile(extracted, readAll(t, r), 0o755); err != nil {
			t.Fatal(err)
		}
	})
	if !slices.Equal(entries, []string{"uc"}) {
		t.Fatalf("image %s: layer holds %q, want uc alone", p, entries)
	}
	if got, want := sha256Of(t, extracted), sha256Of(t, binary); got != want {
		t.Errorf("image %s: /uc has sha256 %s, the release's binary %s", p, got, want)
	}
	if p.OS == runtime.GOOS && p.Arch == runtime.GOARCH {
		checkVersionOutput(t, extracted, src)
	}
}

// checkChart: the packaged chart is src's version, defaults to its image,
// has the commit's time in every entry and its gzip header (it is
// reproducible), passes helm lint --strict (values against
// values.schema.json), and the test bed's API server accepts what it
// renders (a server-side dry run).
func checkChart(t *testing.T, path string, src ucrelease.Source) {
	ch, err := loader.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	zr := gunzip(t, path)
	if !zr.ModTime.Equal(src.Time) || zr.Name != "" {
		t.Errorf("chart: gzip header time %s, name %q; want the commit's time %s, no name", zr.ModTime, zr.Name, src.Time)
	}
	eachEntry(t, zr, func(h *tar.Header, _ io.Reader) {
		if !h.ModTime.Equal(src.Time) || h.Mode != 0o644 || h.Uid != 0 || h.Gid != 0 || h.Uname != "" || h.Gname != "" {
			t.Errorf("chart: entry %s: time %s, mode %o, owner %d:%d (%q:%q); want the commit's time %s, 644, 0:0, no names", h.Name, h.ModTime, h.Mode, h.Uid, h.Gid, h.Uname, h.Gname, src.Time)
		}
	})
	if ch.Metadata.Version != src.Version || ch.Metadata.AppVersion != src.Version || ch.Schema == nil {
		t.Errorf("chart: version %s, appVersion %s, schema %t; want %s, %s, a schema", ch.Metadata.Version, ch.Metadata.AppVersion, ch.Schema != nil, src.Version, src.Version)
	}
	// helm lint --strict of the archive: what it lints, expanded.
	expanded := t.TempDir()
	if err := chartutil.ExpandFile(expanded, path); err != nil {
		t.Fatal(err)
	}
	const namespace = "uc-system"
	res := lint.All(filepath.Join(expanded, ch.Name()), nil, namespace, false)
	for _, m := range res.Messages {
		if m.Severity >= support.WarningSev {
			t.Errorf("helm lint --strict: %v", m)
		} else {
			t.Log(m)
		}
	}

	m, err := helmchart.Render(ch, "uc", namespace, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	images := 0
	for _, o := range m.OfKind("Deployment") {
		d := manifests.Typed[appsv1.Deployment](t, m, "Deployment", o.GetName())
		for _, c := range d.Spec.Template.Spec.Containers {
			images++
			if want := version.Image + ":" + src.Version; c.Image != want {
				t.Errorf("Deployment %s runs %s, want %s", d.Name, c.Image, want)
			}
		}
	}
	if images == 0 {
		t.Error("the chart renders no Deployment of uc")
	}

	bed := testbed.New(t)
	kube, err := kubernetes.NewForConfig(bed.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dry, err := helmchart.NewDryRunner(bed.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	for _, o := range m {
		if err := dry.DryRun(ctx, o); err != nil {
			t.Errorf("%s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
	t.Logf("helm lint: %d messages; the API server accepted the packaged chart's %d objects", len(res.Messages), len(m))
}

// checkJSSDK: the packed JavaScript SDK is @universalcontroller/worker at
// src's version, with its entry point.
func checkJSSDK(t *testing.T, path string, src ucrelease.Source) {
	files := map[string][]byte{}
	eachEntry(t, gunzip(t, path), func(h *tar.Header, r io.Reader) { files[h.Name] = readAll(t, r) })
	var pkg struct{ Name, Version, Main string }
	if err := json.Unmarshal(files["package/package.json"], &pkg); err != nil {
		t.Fatalf("package/package.json: %v", err)
	}
	if pkg.Name != "@universalcontroller/worker" || pkg.Version != src.Version || files["package/"+pkg.Main] == nil {
		t.Errorf("the JavaScript SDK: %s %s, main %s; holds %q; want @universalcontroller/worker %s with its main", pkg.Name, pkg.Version, pkg.Main, slices.Sorted(maps.Keys(files)), src.Version)
	}
}

// TestOneVersion: the chart's version and appVersion, the JavaScript SDK's
// version and every uc image named in the repository (manifests, docs,
// kustomize overlays) are internal/version's Release.
func TestOneVersion(t *testing.T) {
	ch, err := loader.Load(filepath.Join(repoRoot, "deploy", "helm", "uc"))
	if err != nil {
		t.Fatal(err)
	}
	if ch.Metadata.Version != version.Release || ch.Metadata.AppVersion != version.Release {
		t.Errorf("deploy/helm/uc/Chart.yaml: version %s, appVersion %s; want %s", ch.Metadata.Version, ch.Metadata.AppVersion, version.Release)
	}
	var pkg struct{ Version string }
	if err := json.Unmarshal(readFile(t, filepath.Join(repoRoot, "sdk", "js", "package.json")), &pkg); err != nil {
		t.Fatal(err)
	}
	if pkg.Version != version.Release {
		t.Errorf("sdk/js/package.json: version %s, want %s", pkg.Version, version.Release)
	}

	out, err := exec.CommandContext(t.Context(), "git", "-C", repoRoot, "ls-files").Output()
	if err != nil {
		t.Fatal(err)
	}
	tagged := regexp.MustCompile(regexp.QuoteMeta(version.Image) + `:([\w.-]+)`)
	newTag := regexp.MustCompile(`name: ` + regexp.QuoteMeta(version.Image) + `\s+newTag: "?([\w.-]+)`)
	named := 0
	for name := range strings.FieldsSeq(string(out)) {
		b, err := os.ReadFile(filepath.Join(repoRoot, name))
		if err != nil {
			t.Fatal(err)
		}
		for _, re := range []*regexp.Regexp{tagged, newTag} {
			for _, m := range re.FindAllSubmatch(b, -1) {
				named++
				if string(m[1]) != version.Release {
					t.Errorf("%s: %s; want the tag %s", name, m[0], version.Release)
				}
			}
		}
	}
	if named < 4 {
		t.Errorf("%d mentions of the uc image with a tag; want deploy/uc's 3 and deploy/kustomization.yaml's at least", named)
	}
}

// untarLayout extracts the OCI layout archive at path.
func untarLayout(t *testing.T, path string) layout.Path {
	t.Helper()
	dir := t.TempDir()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	eachEntry(t, f, func(h *tar.Header, r io.Reader) {
		target := filepath.Join(dir, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(target, dir+string(filepath.Separator)) {
			t.Fatalf("%s: entry %s outside the layout", path, h.Name)
		}
		var err error
		if h.Typeflag == tar.TypeDir {
			err = os.MkdirAll(target, 0o755)
		} else {
			err = os.WriteFile(target, readAll(t, r), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	})
	l, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// gunzip reads the gzip file path, until the test ends.
func gunzip(t *testing.T, path string) *gzip.Reader {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	return zr
}

// eachEntry calls fn with each entry of the tar archive r, and a reader of
// its content.
func eachEntry(t *testing.T, r io.Reader, fn func(*tar.Header, io.Reader)) {
	t.Helper()
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		fn(h, tr)
	}
}

// ls is the names of dir's files.
func ls(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func readAll(t *testing.T, r io.Reader) []byte {
	t.Helper()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func readTrimmed(t *testing.T, path string) string {
	t.Helper()
	return strings.TrimSpace(string(readFile(t, path)))
}

func sha256Of(t *testing.T, path string) string {
	t.Helper()
	sum, err := ucrelease.SHA256(path)
	if err != nil {
		t.Fatal(err)
	}
	return sum
}
