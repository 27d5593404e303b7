// Package buildinfo says which build a binary is: the version, the commit
// it was built from and the Go that built it, read from the build
// information the Go toolchain embeds in every binary
// (runtime/debug.ReadBuildInfo), so nothing has to be stamped by hand.
package buildinfo

import (
	"fmt"
	"runtime/debug"
	"strings"
)

// Info is what a build says about itself. A field the build did not record
// is its zero value.
type Info struct {
	// Version of the main module: a release tag (v1.2.0) when installed
	// with go install ...@v1.2.0, a pseudo-version stamped from the
	// checkout's commit (v0.0.0-20261122...-0123456789ab, "+dirty" with
	// uncommitted changes) when built there, else "(devel)".
	Version string
	// Revision is the commit (vcs.revision); empty when built with
	// -buildvcs=false or outside a git checkout.
	Revision string
	// Time is the commit's time (vcs.time), RFC 3339.
	Time string
	// Modified: the checkout had uncommitted changes (vcs.modified).
	Modified bool
	// GoVersion is the toolchain that built the binary (go1.26.8).
	GoVersion string
	// Platform is GOOS/GOARCH (linux/amd64).
	Platform string
}

// Read returns this binary's Info. ok is false in the rare binary built
// without module support; Info then holds only what runtime knows.
func Read() (info Info, ok bool) {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return Info{}, false
	}
	return FromBuildInfo(bi), true
}

// FromBuildInfo picks Info out of the toolchain's build information.
func FromBuildInfo(bi *debug.BuildInfo) Info {
	info := Info{Version: bi.Main.Version, GoVersion: bi.GoVersion}
	var goos, goarch string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			info.Revision = s.Value
		case "vcs.time":
			info.Time = s.Value
		case "vcs.modified":
			info.Modified = s.Value == "true"
		case "GOOS":
			goos = s.Value
		case "GOARCH":
			goarch = s.Value
		}
	}
	if goos != "" && goarch != "" {
		info.Platform = goos + "/" + goarch
	}
	return info
}

// Format writes info for a person, one fact a line, under the program's
// name and version. version, when set (the -ldflags "-X main.version=..."
// of a packager), replaces the module version.
func (info Info) Format(program, version string) string {
	if version == "" {
		version = info.Version
	}
	if version == "" {
		version = "(unknown)"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s\n", program, version)
	switch {
	case info.Revision == "":
		b.WriteString("revision  unknown (built with -buildvcs=false or outside a git checkout)\n")
	case info.Modified:
		fmt.Fprintf(&b, "revision  %s (modified: built with uncommitted changes)\n", info.Revision)
	default:
		fmt.Fprintf(&b, "revision  %s\n", info.Revision)
	}
	if info.Time != "" {
		fmt.Fprintf(&b, "committed %s\n", info.Time)
	}
	goVersion := strings.TrimSpace(info.GoVersion + " " + info.Platform)
	if goVersion == "" {
		goVersion = "unknown"
	}
	fmt.Fprintf(&b, "go        %s\n", goVersion)
	return b.String()
}
