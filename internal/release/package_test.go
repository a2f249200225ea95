package release

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart/loader"
)

// chartDir is the repository's chart.
var chartDir = filepath.Join("..", "..", "deploy", "helm", "uc")

// TestPackageChartReproducible: the chart packaged twice, the clock's
// second moved on between, is the same bytes; another commit time makes
// other bytes.
func TestPackageChartReproducible(t *testing.T) {
	src := Source{Version: "1.2.3-dev.gaaaaaaaaaaaa", Commit: strings.Repeat("a", 40), Time: time.Date(2026, 7, 1, 10, 0, 0, 0, time.UTC)}
	first := packageChart(t, src)
	// chartutil.Save stamps time.Now, which the tar writer rounds to the
	// second: package again once that second is past.
	stamped, deadline := time.Now().Round(time.Second), time.Now().Add(5*time.Second)
	for !time.Now().Round(time.Second).After(stamped) {
		if time.Now().After(deadline) {
			t.Fatal("the clock's second did not move on in 5s")
		}
		runtime.Gosched()
	}
	if again := packageChart(t, src); !bytes.Equal(again, first) {
		t.Error("the chart packaged again, a second later, differs")
	}
	later := src
	later.Time = later.Time.Add(time.Second)
	if b := packageChart(t, later); bytes.Equal(b, first) {
		t.Error("another commit time made the same archive")
	}
}

// TestPackageChart: the archive is the chart at src's version, loads with
// helm's loader, and has src's time and fixed owners and modes in every
// header, Chart.yaml first, as helm package writes it.
func TestPackageChart(t *testing.T) {
	for _, src := range []Source{
		{Version: "1.2.3", Commit: strings.Repeat("a", 40), Time: time.Date(2026, 7, 1, 10, 0, 0, 0, time.UTC)},
		{Version: "1.2.3-dev.gbbbbbbbbbbbb.dirty", Commit: strings.Repeat("b", 40), Time: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC), Modified: true},
	} {
		b := packageChart(t, src)
		ch, err := loader.LoadArchive(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("%s: load the archive: %v", src.Version, err)
		}
		if m := ch.Metadata; m.Version != src.Version || m.AppVersion != src.Version {
			t.Errorf("%s: version %s, appVersion %s; want %s for both", src.Version, m.Version, m.AppVersion, src.Version)
		}
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		if zr.Name != "" || !zr.ModTime.Equal(src.Time) {
			t.Errorf("%s: gzip header name %q, time %s; want no name, %s", src.Version, zr.Name, zr.ModTime, src.Time)
		}
		var names []string
		tr := tar.NewReader(zr)
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			names = append(names, h.Name)
			if !h.ModTime.Equal(src.Time) || !h.AccessTime.IsZero() || !h.ChangeTime.IsZero() ||
				h.Typeflag != tar.TypeReg || h.Mode != 0o644 || h.Uid != 0 || h.Gid != 0 || h.Uname != "" || h.Gname != "" {
				t.Errorf("%s: entry %s: time %s (access %s, change %s), type %q, mode %o, owner %d:%d (%q:%q); want %s, a regular file, 644, 0:0, no names",
					src.Version, h.Name, h.ModTime, h.AccessTime, h.ChangeTime, h.Typeflag, h.Mode, h.Uid, h.Gid, h.Uname, h.Gname, src.Time)
			}
		}
		if len(names) < 3 || names[0] != "uc/Chart.yaml" {
			t.Errorf("%s: entries %q; want uc/Chart.yaml first, then the chart's files", src.Version, names)
		}
	}
}

// packageChart is the repository's chart packaged as src.
func packageChart(t *testing.T, src Source) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), Names{src.Version}.Chart())
	if err := PackageChart(chartDir, src, path); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
