// Package version is uc's version, declared once: the release this tree
// is, and what a build says it is. uc version prints it, the release tool
// (hack/release) stamps it in the binaries, the image and the chart, and
// test/release checks that the chart, the manifests and the JavaScript
// SDK name the same.
package version

import (
	"cmp"
	"fmt"
	"runtime/debug"
	"strings"
)

// Release is the version this tree is released as (SemVer, without the
// leading v of its git tag, v0.1.0): the chart's version and appVersion,
// the image tag of every manifest, the JavaScript SDK's version. After a
// release it moves to the next one; a build of a commit that is not the
// release's tag says Release-dev.
const Release = "0.1.0"

// Tag is the git tag of Release.
const Tag = "v" + Release

// Image is the repository of uc's image; a release's tag is its version.
const Image = "ghcr.io/universalcontroller/uc"

// Set by the release tool with -ldflags -X (see LinkerFlags): the
// version it built, the commit, and the commit's time.
var (
	stampedVersion string
	stampedCommit  string
	stampedDate    string
)

// Info is what a uc binary says about its build.
type Info struct {
	Version   string // Release, Release-dev, or a release tool's snapshot version
	Commit    string // the commit it was built from, empty if unknown
	Date      string // the commit's time, RFC 3339, empty if unknown
	Modified  bool   // the working tree had changes
	GoVersion string // the Go toolchain's version
}

// stamp is what the release tool stamped in a binary.
type stamp struct{ version, commit, date string }

// Read is the running binary's version.
func Read() Info {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		info = &debug.BuildInfo{}
	}
	return of(stamp{stampedVersion, stampedCommit, stampedDate}, info)
}

// of is the version of a binary with stamp s and build information info.
// A release tool's stamp wins; otherwise, a build of the release's tag
// (go install universalcontroller.dev/uc/cmd/uc@v0.1.0, or go build in a
// clean checkout of the tag) is Release, any other build Release-dev, its
// commit what the Go toolchain stamped.
func of(s stamp, info *debug.BuildInfo) Info {
	v := Info{Version: Release + "-dev", GoVersion: info.GoVersion}
	for _, set := range info.Settings {
		switch set.Key {
		case "vcs.revision":
			v.Commit = set.Value
		case "vcs.time":
			v.Date = set.Value
		case "vcs.modified":
			v.Modified = set.Value == "true"
		}
	}
	switch {
	case s.version != "":
		v.Version, v.Commit, v.Date = s.version, s.commit, s.date
		v.Modified = strings.HasSuffix(s.version, dirtySuffix)
	case info.Main.Version == Tag:
		v.Version = Release
	}
	return v
}

// String is the version in lines of "name: value", unknown for what was
// not stamped.
func (v Info) String() string {
	commit := cmp.Or(v.Commit, "unknown")
	if v.Modified {
		commit += " (modified)"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "uc %s\n", v.Version)
	fmt.Fprintf(&b, "commit: %s\n", commit)
	fmt.Fprintf(&b, "date:   %s\n", cmp.Or(v.Date, "unknown"))
	fmt.Fprintf(&b, "go:     %s\n", cmp.Or(v.GoVersion, "unknown"))
	return b.String()
}

// dirtySuffix ends the snapshot version of a working tree with changes.
const dirtySuffix = ".dirty"

// Snapshot is the version the release tool gives a build of commit that
// is not Release's tag: Release-dev.g<12 hex digits of the commit>, and
// .dirty if the working tree had changes. It is a SemVer pre-release of
// Release and a valid image tag.
func Snapshot(commit string, modified bool) string {
	v := Release + "-dev.g" + commit[:min(12, len(commit))]
	if modified {
		v += dirtySuffix
	}
	return v
}

// LinkerFlags are the -ldflags -X flags that stamp version, commit and
// date in a uc binary.
func LinkerFlags(version, commit, date string) string {
	const pkg = "universalcontroller.dev/uc/internal/version."
	return fmt.Sprintf("-X %sstampedVersion=%s -X %sstampedCommit=%s -X %sstampedDate=%s",
		pkg, version, pkg, commit, pkg, date)
}
