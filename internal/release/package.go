package release

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"

	"universalcontroller.dev/uc/internal/version"
)

// PackageChart packages the chart in dir, as helm package does, into the
// archive path, with src's version as the chart's version and appVersion
// (the image tag it defaults to). The chart must say version.Release: a
// snapshot's chart is the release's, versioned as the snapshot. The
// archive is reproducible: its times are src's (see restamp).
func PackageChart(dir string, src Source, path string) error {
	ch, err := loader.Load(dir)
	if err != nil {
		return fmt.Errorf("load the chart: %w", err)
	}
	if m := ch.Metadata; m.Version != version.Release || m.AppVersion != version.Release {
		return fmt.Errorf("%s/Chart.yaml: version %s, appVersion %s; want internal/version's %s for both", dir, m.Version, m.AppVersion, version.Release)
	}
	ch.Metadata.Version, ch.Metadata.AppVersion = src.Version, src.Version
	if err := ch.Validate(); err != nil {
		return fmt.Errorf("the chart: %w", err)
	}
	tmp, err := os.MkdirTemp("", "uc-chart-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	saved, err := chartutil.Save(ch, tmp)
	if err != nil {
		return fmt.Errorf("package the chart: %w", err)
	}
	b, err := os.ReadFile(saved)
	if err != nil {
		return fmt.Errorf("package the chart: %w", err)
	}
	if b, err = restamp(b, src.Time); err != nil {
		return fmt.Errorf("package the chart: %s: %w", filepath.Base(saved), err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("package the chart: %w", err)
	}
	return nil
}

// restamp writes the gzipped tar archive again, as chartutil.Save wrote
// it but for the packaging time it stamps in every entry: each entry, in
// its order, a regular file of mode 644 owned by 0:0 with no owner names,
// its time t; the gzip header Helm's (its comment and extra field), with
// no name and the time t.
func restamp(archive []byte, t time.Time) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(archive))
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	zw.Header = zr.Header
	zw.Name, zw.ModTime = "", t
	tw := tar.NewWriter(zw)
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		if h.Typeflag != tar.TypeReg {
			return nil, fmt.Errorf("entry %s: type %q, want a regular file", h.Name, h.Typeflag)
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: h.Name, Size: h.Size, Mode: 0o644, ModTime: t}); err != nil {
			return nil, fmt.Errorf("entry %s: %w", h.Name, err)
		}
		if _, err := io.Copy(tw, tr); err != nil {
			return nil, fmt.Errorf("entry %s: %w", h.Name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// packJSSDK packs the JavaScript SDK in dir with npm pack into out, as
// version: a copy of its package.json and the files it lists, its
// version set with npm version.
func packJSSDK(ctx context.Context, dir, version, out string) error {
	b, err := os.ReadFile(filepath.Join(dir, "package.json"))
	if err != nil {
		return fmt.Errorf("JavaScript SDK: %w", err)
	}
	var pkg struct{ Files []string }
	if err := json.Unmarshal(b, &pkg); err != nil {
		return fmt.Errorf("JavaScript SDK: package.json: %w", err)
	}
	tmp, err := os.MkdirTemp("", "uc-js-sdk-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	for _, name := range append([]string{"package.json"}, pkg.Files...) {
		if err := copyFile(filepath.Join(dir, name), filepath.Join(tmp, name)); err != nil {
			return fmt.Errorf("JavaScript SDK: %w", err)
		}
	}
	if err := run(ctx, tmp, nil, "npm", "version", version, "--no-git-tag-version", "--allow-same-version"); err != nil {
		return fmt.Errorf("JavaScript SDK: %w", err)
	}
	abs, err := filepath.Abs(out)
	if err != nil {
		return err
	}
	if err := run(ctx, tmp, nil, "npm", "pack", "--pack-destination", abs); err != nil {
		return fmt.Errorf("JavaScript SDK: %w", err)
	}
	return nil
}

// copyFile copies the regular file from to to.
func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	if fi, err := in.Stat(); err != nil || !fi.Mode().IsRegular() {
		return fmt.Errorf("%s: not a regular file (%v)", from, err)
	}
	outf, err := os.Create(to)
	if err != nil {
		return err
	}
	if _, err := io.Copy(outf, in); err != nil {
		outf.Close()
		return err
	}
	return outf.Close()
}

// writeChecksums writes the SHA-256 sums of every other file in dir to
// its Checksums file.
func writeChecksums(dir string, n Names) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("checksums: %w", err)
	}
	var sums strings.Builder
	for _, e := range entries {
		if e.Name() == n.Checksums() || !e.Type().IsRegular() {
			continue
		}
		sum, err := SHA256(filepath.Join(dir, e.Name()))
		if err != nil {
			return fmt.Errorf("checksums: %w", err)
		}
		fmt.Fprintf(&sums, "%s  %s\n", sum, e.Name())
	}
	return os.WriteFile(filepath.Join(dir, n.Checksums()), []byte(sums.String()), 0o644)
}

// SHA256 is the hex SHA-256 sum of the file at path.
func SHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
