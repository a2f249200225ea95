package version

import (
	"runtime/debug"
	"testing"
)

func TestOf(t *testing.T) {
	vcs := []debug.BuildSetting{
		{Key: "vcs", Value: "git"},
		{Key: "vcs.revision", Value: "85cc31e5dcea3d8c970fe0b03ab7dd0f7c6bc8fa"},
		{Key: "vcs.time", Value: "2026-07-01T10:00:00Z"},
		{Key: "vcs.modified", Value: "false"},
	}
	for _, tc := range []struct {
		name  string
		stamp stamp
		info  debug.BuildInfo
		want  string
	}{{
		name:  "the release tool's release",
		stamp: stamp{Release, "85cc31e5dcea3d8c970fe0b03ab7dd0f7c6bc8fa", "2026-07-01T10:00:00Z"},
		info:  debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}},
		want:  "uc " + Release + "\ncommit: 85cc31e5dcea3d8c970fe0b03ab7dd0f7c6bc8fa\ndate:   2026-07-01T10:00:00Z\ngo:     go1.26.8\n",
	}, {
		name:  "the release tool's snapshot of a tree with changes",
		stamp: stamp{Snapshot("85cc31e5dcea3d8c970fe0b03ab7dd0f7c6bc8fa", true), "85cc31e5dcea3d8c970fe0b03ab7dd0f7c6bc8fa", "2026-07-01T10:00:00Z"},
		info:  debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}},
		want:  "uc " + Release + "-dev.g85cc31e5dcea.dirty\ncommit: 85cc31e5dcea3d8c970fe0b03ab7dd0f7c6bc8fa (modified)\ndate:   2026-07-01T10:00:00Z\ngo:     go1.26.8\n",
	}, {
		name: "go install of the release's tag",
		info: debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: Tag}, Settings: vcs},
		want: "uc " + Release + "\ncommit: 85cc31e5dcea3d8c970fe0b03ab7dd0f7c6bc8fa\ndate:   2026-07-01T10:00:00Z\ngo:     go1.26.8\n",
	}, {
		name: "go build of another commit, with changes",
		info: debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.0.0-20260701100000-85cc31e5dcea+dirty"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "85cc31e5dcea3d8c970fe0b03ab7dd0f7c6bc8fa"},
			{Key: "vcs.time", Value: "2026-07-01T10:00:00Z"},
			{Key: "vcs.modified", Value: "true"},
		}},
		want: "uc " + Release + "-dev\ncommit: 85cc31e5dcea3d8c970fe0b03ab7dd0f7c6bc8fa (modified)\ndate:   2026-07-01T10:00:00Z\ngo:     go1.26.8\n",
	}, {
		name: "go build without version control information",
		info: debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}},
		want: "uc " + Release + "-dev\ncommit: unknown\ndate:   unknown\ngo:     go1.26.8\n",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			if got := of(tc.stamp, &tc.info).String(); got != tc.want {
				t.Errorf("got\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

func TestSnapshot(t *testing.T) {
	for _, tc := range []struct {
		commit   string
		modified bool
		want     string
	}{
		{"0123456789abcdef0123456789abcdef01234567", false, Release + "-dev.g0123456789ab"},
		{"0123456789abcdef0123456789abcdef01234567", true, Release + "-dev.g0123456789ab.dirty"},
	} {
		if got := Snapshot(tc.commit, tc.modified); got != tc.want {
			t.Errorf("Snapshot(%s, %t) = %s, want %s", tc.commit, tc.modified, got, tc.want)
		}
	}
}
