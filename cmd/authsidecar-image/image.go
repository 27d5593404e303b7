package main

import (
	"archive/tar"
	"bytes"
	"debug/buildinfo"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

type imageParts struct {
	binary, certs []byte
	arch          string
	created       time.Time
	info          *buildinfo.BuildInfo
}

// newImage is one layer on an empty base (no shell, no libc, no package
// manager) and the config that runs the binary as user 65532.
func newImage(p imageParts) (v1.Image, error) {
	layerTar, err := layerFiles(p)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	})
	if err != nil {
		return nil, err
	}
	img, err := mutate.Append(empty.Image, mutate.Addendum{
		Layer: layer,
		History: v1.History{
			Created:   v1.Time{Time: p.created},
			CreatedBy: "go run ./cmd/authsidecar-image",
			Comment:   "the authsidecar binary and CA certificates",
		},
	})
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", p.arch
	cfg.Created = v1.Time{Time: p.created}
	cfg.Config = v1.Config{
		User:       fmt.Sprintf("%d:%d", user, user),
		Entrypoint: []string{binaryPath},
		Cmd:        defaultCmd,
		WorkingDir: dataDir,
		// PATH lets `kubectl exec ... -- authsidecar users list` find it.
		Env:    []string{"PATH=" + filepath.Dir(binaryPath)},
		Labels: labels(p.info),
	}
	return mutate.ConfigFile(img, cfg)
}

// labels are the OCI annotations a registry shows: where the source is,
// which commit, which licence.
func labels(info *buildinfo.BuildInfo) map[string]string {
	l := map[string]string{
		"org.opencontainers.image.title":    "authsidecar",
		"org.opencontainers.image.source":   "https://" + strings.TrimSuffix(info.Main.Path, "/cmd/authsidecar"),
		"org.opencontainers.image.version":  info.Main.Version,
		"org.opencontainers.image.licenses": "Apache-2.0",
	}
	if info.Main.Path == "" {
		l["org.opencontainers.image.source"] = "https://" + strings.TrimSuffix(info.Path, "/cmd/authsidecar")
	}
	for _, s := range info.Settings {
		if s.Key == "vcs.revision" {
			l["org.opencontainers.image.revision"] = s.Value
		}
	}
	return l
}

// layerFiles is the layer's tar: its directories, the binary and the CA
// bundle, in a fixed order with fixed owners and times.
func layerFiles(p imageParts) ([]byte, error) {
	type entry struct {
		name     string
		mode     int64
		uid      int
		contents []byte // nil: a directory
	}
	entries := []entry{
		{name: "etc/", mode: 0o755},
		{name: "etc/authsidecar/", mode: 0o755}, // the config volume's mount point
		{name: "etc/ssl/", mode: 0o755},
		{name: "etc/ssl/certs/", mode: 0o755},
		{name: strings.TrimPrefix(caPath, "/"), mode: 0o644, contents: p.certs},
		// SQLite's temporary files; Kubernetes mounts an emptyDir here
		// when the root file system is read-only.
		{name: "tmp/", mode: 0o1777},
		{name: "usr/", mode: 0o755},
		{name: "usr/local/", mode: 0o755},
		{name: "usr/local/bin/", mode: 0o755},
		{name: strings.TrimPrefix(binaryPath, "/"), mode: 0o755, contents: p.binary},
		{name: "var/", mode: 0o755},
		{name: "var/lib/", mode: 0o755},
		{name: strings.TrimPrefix(dataDir, "/") + "/", mode: 0o700, uid: user},
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{
			Name: e.name, Mode: e.mode, Uid: e.uid, Gid: e.uid,
			ModTime: p.created, Format: tar.FormatPAX,
		}
		if e.contents == nil {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.contents))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.contents); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// writeTarball writes img under ref to path, through a temporary file so a
// failed build leaves no half-written image.
func writeTarball(path, ref string, img v1.Image) error {
	tag, err := name.NewTag(ref)
	if err != nil {
		return fmt.Errorf("-tag %q: %w", ref, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := tarball.WriteToFile(tmp, tag, img); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return os.Rename(tmp, path)
}
