package buildinfo

import (
	"runtime"
	"runtime/debug"
	"testing"
)

func TestFormat(t *testing.T) {
	settings := func(kv ...string) []debug.BuildSetting {
		var s []debug.BuildSetting
		for i := 0; i < len(kv); i += 2 {
			s = append(s, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return s
	}
	platform := settings("GOOS", "linux", "GOARCH", "arm64", "CGO_ENABLED", "0", "-trimpath", "true")
	tests := []struct {
		name    string
		bi      debug.BuildInfo
		version string
		want    string
	}{{
		name: "release tag",
		bi: debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.0"},
			Settings: append(settings("vcs", "git", "vcs.revision", "0123456789abcdef0123456789abcdef01234567", "vcs.time", "2026-11-25T10:00:00Z", "vcs.modified", "false"), platform...)},
		want: "authsidecar v1.2.0\n" +
			"revision  0123456789abcdef0123456789abcdef01234567\n" +
			"committed 2026-11-25T10:00:00Z\n" +
			"go        go1.26.8 linux/arm64\n",
	}, {
		name: "uncommitted changes",
		bi: debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.0.0-20261125100000-0123456789ab+dirty"},
			Settings: append(settings("vcs.revision", "0123456789abcdef0123456789abcdef01234567", "vcs.time", "2026-11-25T10:00:00Z", "vcs.modified", "true"), platform...)},
		want: "authsidecar v0.0.0-20261125100000-0123456789ab+dirty\n" +
			"revision  0123456789abcdef0123456789abcdef01234567 (modified: built with uncommitted changes)\n" +
			"committed 2026-11-25T10:00:00Z\n" +
			"go        go1.26.8 linux/arm64\n",
	}, {
		name: "no VCS information",
		bi:   debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: platform},
		want: "authsidecar (devel)\n" +
			"revision  unknown (built with -buildvcs=false or outside a git checkout)\n" +
			"go        go1.26.8 linux/arm64\n",
	}, {
		name:    "packager's version",
		bi:      debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}},
		version: "1.2.0-3.fc41",
		want: "authsidecar 1.2.0-3.fc41\n" +
			"revision  unknown (built with -buildvcs=false or outside a git checkout)\n" +
			"go        go1.26.8\n",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := FromBuildInfo(&tt.bi).Format("authsidecar", tt.version); got != tt.want {
				t.Errorf("got\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

// TestRead: a test binary has build info too, built by this very Go.
func TestRead(t *testing.T) {
	info, ok := Read()
	if !ok {
		t.Fatal("got no build info, want the test binary's")
	}
	if info.GoVersion != runtime.Version() {
		t.Errorf("got Go %q, want %q", info.GoVersion, runtime.Version())
	}
	if want := runtime.GOOS + "/" + runtime.GOARCH; info.Platform != want {
		t.Errorf("got platform %q, want %q", info.Platform, want)
	}
}
