package main

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"debug/buildinfo"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

const hostCA = "/etc/ssl/certs/ca-certificates.crt"

// need skips a test whose tool is missing, and fails it under CI=true,
// where .ci/run installs everything.
func need(t *testing.T, msg string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// TestImage builds the image twice, as `go run ./cmd/authsidecar-image`
// does, and checks that both are the same bytes, that the image is what it
// claims (config, one layer holding the binary, the CA bundle and their
// directories, no shell), and that the binary taken out of it runs:
// `version`, `check` and the image's default command (`serve` on the
// config mounted at /etc/authsidecar/sidecar.yaml), as user 65532 in the
// image's file system when the test may chroot.
func TestImage(t *testing.T) {
	if _, err := os.Stat(hostCA); err != nil {
		need(t, "no CA bundle at "+hostCA+" (apt-get install ca-certificates)")
	}
	dir := t.TempDir()
	var images [2]string
	for i := range images {
		images[i] = filepath.Join(dir, fmt.Sprintf("image%d.tar", i))
		res, err := build(context.Background(), options{
			out: images[i], ref: DefaultRef, arch: runtime.GOARCH, caFile: hostCA, src: "../..",
		})
		if err != nil {
			t.Fatalf("build %d: %v", i, err)
		}
		t.Logf("build %d: %s", i, res.digest)
	}
	first, err := os.ReadFile(images[0])
	if err != nil {
		t.Fatal(err)
	}
	second, err := os.ReadFile(images[1])
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first, second) {
		t.Errorf("two builds of the same tree differ (%d and %d bytes, first difference at byte %d): the build is not reproducible",
			len(first), len(second), firstDifference(first, second))
	}

	img, err := tarball.ImageFromPath(images[0], nil)
	if err != nil {
		t.Fatalf("opening the image: %v", err)
	}
	checkConfig(t, img)
	rootfs := filepath.Join(dir, "rootfs")
	files := extractLayer(t, img, rootfs)
	wantFiles := []string{
		"etc/", "etc/authsidecar/", "etc/ssl/", "etc/ssl/certs/", "etc/ssl/certs/ca-certificates.crt",
		"tmp/", "usr/", "usr/local/", "usr/local/bin/", "usr/local/bin/authsidecar",
		"var/", "var/lib/", "var/lib/authsidecar/",
	}
	if !slices.Equal(files, wantFiles) {
		t.Errorf("got the layer's files %q, want exactly %q (the binary, the CA bundle and their directories: no shell)", files, wantFiles)
	}
	certs, _ := os.ReadFile(filepath.Join(rootfs, caPath))
	hostCerts, _ := os.ReadFile(hostCA)
	if !bytes.Equal(certs, hostCerts) {
		t.Errorf("got a CA bundle of %d bytes in the image, want the build machine's %s (%d bytes)", len(certs), hostCA, len(hostCerts))
	}
	bin := filepath.Join(rootfs, binaryPath)
	checkBinary(t, bin)
	runBinary(t, rootfs)
}

func firstDifference(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// checkConfig: who runs what, where, on which platform.
func checkConfig(t *testing.T, img v1.Image) {
	t.Helper()
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cfg.Config
	for _, f := range []struct{ name, got, want string }{
		{"os", cfg.OS, "linux"},
		{"architecture", cfg.Architecture, runtime.GOARCH},
		{"user", c.User, "65532:65532"},
		{"entrypoint", strings.Join(c.Entrypoint, " "), "/usr/local/bin/authsidecar"},
		{"cmd", strings.Join(c.Cmd, " "), "serve -config /etc/authsidecar/sidecar.yaml"},
		{"working dir", c.WorkingDir, "/var/lib/authsidecar"},
		{"licence label", c.Labels["org.opencontainers.image.licenses"], "Apache-2.0"},
		{"source label", c.Labels["org.opencontainers.image.source"], "https://github.com/authsidecar/authsidecar"},
	} {
		if f.got != f.want {
			t.Errorf("got image %s %q, want %q", f.name, f.got, f.want)
		}
	}
	if cfg.Created.Time.After(time.Now()) || cfg.Created.Time.Year() < 1970 {
		t.Errorf("got created %v, want the commit's time or the epoch", cfg.Created.Time)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("got %d layers (%v), want exactly one", len(layers), err)
	}
}

// extractLayer unpacks the image's layer into rootfs, owners included
// when the test may set them, and returns the entries' names in order.
func extractLayer(t *testing.T, img v1.Image, rootfs string) []string {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var names []string
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		if strings.Contains(h.Name, "..") || filepath.IsAbs(h.Name) {
			t.Fatalf("got the entry %q, want a relative path inside the image", h.Name)
		}
		path := filepath.Join(rootfs, h.Name)
		mode := os.FileMode(h.Mode).Perm()
		if h.Mode&0o1000 != 0 {
			mode |= os.ModeSticky
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(path, 0o755); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, data, 0o600); err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatalf("got the entry %q of type %c, want only directories and regular files", h.Name, h.Typeflag)
		}
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		if os.Geteuid() == 0 {
			if err := os.Lchown(path, h.Uid, h.Gid); err != nil {
				t.Fatal(err)
			}
		}
	}
	return names
}

// checkBinary: static, built without cgo and with -trimpath, so it needs
// nothing from the image but itself and names no path of this machine.
func checkBinary(t *testing.T, bin string) {
	t.Helper()
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatalf("the image's binary: %v", err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("got a dynamically linked binary (it names a program interpreter), want a static one")
		}
	}
	f.Close()
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	if settings["CGO_ENABLED"] != "0" || settings["-trimpath"] != "true" {
		t.Errorf("got CGO_ENABLED=%q -trimpath=%q, want 0 and true", settings["CGO_ENABLED"], settings["-trimpath"])
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(data, []byte(root)) {
		t.Errorf("the binary holds this checkout's path %s: -trimpath did not take", root)
	}
}

// runBinary runs the image's binary as the container would: in the
// image's file system (chroot) as user 65532 in /var/lib/authsidecar when
// the test runs as root, else directly from rootfs with the same config.
func runBinary(t *testing.T, rootfs string) {
	t.Helper()
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "upstream saw %s as %q\n", r.URL.Path, r.Header.Get("X-User-Id"))
	}))
	defer upstream.Close()
	port, metricsPort := freePort(t), freePort(t)
	config := fmt.Sprintf(`listen: "127.0.0.1:%d"
base_url: "http://localhost:%d"
upstream: %q
metrics: {listen: "127.0.0.1:%d"}
`, port, port, upstream.URL, metricsPort)
	configPath := filepath.Join(rootfs, configDir, "sidecar.yaml")
	if err := os.WriteFile(configPath, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	chroot := os.Geteuid() == 0
	command := func(args ...string) *exec.Cmd {
		cmd := exec.Command(filepath.Join(rootfs, binaryPath), args...)
		cmd.Env = []string{"PATH=/usr/local/bin", "AUTH_SECRET=" + rand.Text() + rand.Text()}
		cmd.Dir = filepath.Join(rootfs, dataDir)
		if chroot {
			cmd.Path, cmd.Dir = binaryPath, dataDir
			cmd.SysProcAttr = &syscall.SysProcAttr{
				Chroot:     rootfs,
				Credential: &syscall.Credential{Uid: user, Gid: user, Groups: []uint32{}},
			}
		}
		return cmd
	}
	cfgArg := configDir + "/sidecar.yaml"
	if !chroot {
		t.Log("not root: the binary runs outside the image's file system, as this user")
		cfgArg = configPath
	}

	out, err := command("version").CombinedOutput()
	if err != nil {
		t.Fatalf("version: %v\n%s", err, out)
	}
	if want := "go        " + runtime.Version() + " linux/" + runtime.GOARCH + "\n"; !strings.HasPrefix(string(out), "authsidecar ") || !strings.Contains(string(out), want) {
		t.Errorf("got version\n%s\nwant it to start with \"authsidecar \" and hold %q", out, want)
	}
	if head := gitHead(t); head != "" && !strings.Contains(string(out), "revision  "+head) {
		t.Errorf("got version\n%s\nwant the revision %s (this checkout's HEAD)", out, head)
	}

	out, err = command("check", "-config", cfgArg).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "all checks passed") {
		t.Fatalf("check: %v\n%s", err, out)
	}

	// The image's default command, with the config it names.
	cfg := configDir + "/sidecar.yaml"
	if !chroot {
		cfg = configPath
	}
	serve := command("serve", "-config", cfg)
	var logs bytes.Buffer
	serve.Stdout, serve.Stderr = &logs, &logs
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	defer serve.Process.Kill()
	waitReady(t, fmt.Sprintf("http://127.0.0.1:%d/readyz", metricsPort), &logs)
	res, err := http.Post(fmt.Sprintf("http://127.0.0.1:%d/api/auth/sign-up/email", port), "application/json",
		strings.NewReader(`{"name":"Ann","email":"ann@example.com","password":"correct-horse-battery"}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || !strings.Contains(string(body), `"email":"ann@example.com"`) {
		t.Errorf("got sign-up %d %s, want 200 with the user", res.StatusCode, body)
	}
	serve.Process.Signal(syscall.SIGTERM)
	if err := serve.Wait(); err != nil {
		t.Errorf("serve after SIGTERM: %v\n%s", err, logs.String())
	}
	db, err := os.Stat(filepath.Join(rootfs, dataDir, "authsidecar.db"))
	if err != nil {
		t.Fatalf("got no database in %s (the working directory): %v", dataDir, err)
	}
	if st := db.Sys().(*syscall.Stat_t); chroot && st.Uid != user {
		t.Errorf("got the database owned by uid %d, want %d: the image runs as its user", st.Uid, user)
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func waitReady(t *testing.T, url string, logs *bytes.Buffer) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		res, err := http.Get(url)
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return
			}
		}
	}
	t.Fatalf("%s did not answer 200 within 60 s; the sidecar's log:\n%s", url, logs.String())
}

// gitHead is the commit the build should name, when the repository is a
// git checkout Go stamps (a worktree's .git file is not: Go records
// nothing there), else "".
func gitHead(t *testing.T) string {
	t.Helper()
	if fi, err := os.Stat("../../.git"); err != nil || !fi.IsDir() {
		return ""
	}
	out, err := exec.Command("git", "-C", "../..", "rev-parse", "HEAD").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// TestManifestsNameTheImage: every authsidecar container in the Kubernetes
// manifests runs the image this command builds, with its default command.
func TestManifestsNameTheImage(t *testing.T) {
	manifests, err := filepath.Glob("../../deploy/kubernetes/*.yaml")
	if err != nil || len(manifests) == 0 {
		t.Fatalf("no manifests (%v)", err)
	}
	found := 0
	for _, m := range manifests {
		for _, c := range podContainers(t, m) {
			if !strings.HasPrefix(c.Name, "authsidecar") {
				continue
			}
			found++
			if c.Image != DefaultRef {
				t.Errorf("%s: container %s runs %q, want %q (what go run ./cmd/authsidecar-image builds)", m, c.Name, c.Image, DefaultRef)
			}
			if len(c.Command) > 0 || (len(c.Args) > 0 && !slices.Equal(c.Args, defaultCmd)) {
				t.Errorf("%s: container %s overrides the image's command (%q %q), want its default %q", m, c.Name, c.Command, c.Args, defaultCmd)
			}
		}
	}
	if found == 0 {
		t.Error("no authsidecar container in deploy/kubernetes")
	}
}
