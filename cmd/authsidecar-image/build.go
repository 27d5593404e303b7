package main

import (
	"context"
	"debug/buildinfo"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"
)

// DefaultRef is the name the image is written under, and the image the
// Kubernetes manifests in deploy/kubernetes run (TestManifestsNameTheImage).
const DefaultRef = "ghcr.io/authsidecar/authsidecar:latest"

// The image's layout: where the binary, the CA bundle, the config and the
// data live, and who runs it.
const (
	binaryPath = "/usr/local/bin/authsidecar"
	caPath     = "/etc/ssl/certs/ca-certificates.crt" // where Go's crypto/x509 looks first on Linux
	configDir  = "/etc/authsidecar"
	dataDir    = "/var/lib/authsidecar" // the working directory: sidecar.yaml's default database.path lands here
	user       = 65532                  // distroless' "nonroot"; no /etc/passwd needed for a numeric user
)

// defaultCmd is what the image runs without arguments: the config comes
// from a volume (a Kubernetes ConfigMap) mounted at configDir.
var defaultCmd = []string{"serve", "-config", configDir + "/sidecar.yaml"}

type options struct {
	out, ref, arch, caFile, src string
	// sourceDateEpoch, when set (unix seconds), dates the image and its
	// files instead of the commit (reproducible-builds.org's convention).
	sourceDateEpoch string
}

type result struct {
	digest  string // the image's manifest digest
	version string // of the binary, from its build info
}

// build compiles the binary, lays out the image around it and writes the
// tarball.
func build(ctx context.Context, opts options) (result, error) {
	tmp, err := os.MkdirTemp("", "authsidecar-image-")
	if err != nil {
		return result{}, err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "authsidecar")
	if err := goBuild(ctx, opts.src, opts.arch, bin); err != nil {
		return result{}, err
	}
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		return result{}, fmt.Errorf("reading the binary's build info: %w", err)
	}
	created, err := imageTime(opts.sourceDateEpoch, info)
	if err != nil {
		return result{}, err
	}
	binary, err := os.ReadFile(bin)
	if err != nil {
		return result{}, err
	}
	certs, err := os.ReadFile(opts.caFile)
	if err != nil {
		return result{}, fmt.Errorf("the CA bundle: %w (install ca-certificates, or give -ca-certs)", err)
	}
	img, err := newImage(imageParts{binary: binary, certs: certs, arch: opts.arch, created: created, info: info})
	if err != nil {
		return result{}, err
	}
	if err := writeTarball(opts.out, opts.ref, img); err != nil {
		return result{}, err
	}
	digest, err := img.Digest()
	if err != nil {
		return result{}, err
	}
	return result{digest: digest.String(), version: info.Main.Version}, nil
}

// goBuild builds a static binary for linux/arch: no cgo (the SQLite driver
// is pure Go), no paths of this machine (-trimpath), no symbol table or
// DWARF (a third smaller; stack traces keep their names), and the commit
// stamped when src is a git checkout (-buildvcs=auto overrides a
// GOFLAGS=-buildvcs=false, so `authsidecar version` names the commit).
func goBuild(ctx context.Context, src, arch, out string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=auto", "-ldflags=-s -w", "-o", out, "./cmd/authsidecar")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build ./cmd/authsidecar in %s: %w", src, err)
	}
	return nil
}

// imageTime is the one time the image carries (its creation and every
// file's mtime): SOURCE_DATE_EPOCH when set, else the commit's time, else
// the Unix epoch. Never the clock, so two builds are the same bytes.
func imageTime(sourceDateEpoch string, info *buildinfo.BuildInfo) (time.Time, error) {
	if sourceDateEpoch != "" {
		sec, err := strconv.ParseInt(sourceDateEpoch, 10, 64)
		if err != nil || sec < 0 {
			return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q: want unix seconds", sourceDateEpoch)
		}
		return time.Unix(sec, 0).UTC(), nil
	}
	for _, s := range info.Settings {
		if s.Key == "vcs.time" {
			t, err := time.Parse(time.RFC3339, s.Value)
			if err != nil {
				return time.Time{}, fmt.Errorf("the binary's vcs.time %q: %w", s.Value, err)
			}
			return t.UTC(), nil
		}
	}
	return time.Unix(0, 0).UTC(), nil
}
