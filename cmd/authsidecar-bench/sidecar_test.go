package main

import (
	"os"
	"os/exec"
	"testing"

	"github.com/authsidecar/authsidecar/config"
)

// TestSidecarConfigs: every kind of sidecar the benchmark starts has a
// config the real parser accepts, in the mode and on the database meant,
// and a verifier expects the issuing sidecars' iss and aud.
func TestSidecarConfigs(t *testing.T) {
	const base = "http://127.0.0.1:4000"
	for _, tc := range []struct {
		name       string
		c          sidecarConfig
		mode       config.Mode
		driver     config.Driver
		needSecret bool
	}{
		{"full on sqlite", sidecarConfig{db: "/tmp/x.db", access: true}, "full", "sqlite", true},
		{"full on postgres", sidecarConfig{pgURL: "postgres://u:p@127.0.0.1:5432/db"}, "full", "postgres", true},
		{"verifier", sidecarConfig{jwksURL: "http://127.0.0.1:4001/api/auth/jwks", issuer: base, access: true}, "verifier", "none", false},
		{"many clients from one address", sidecarConfig{db: "/tmp/x.db", access: true, oneAddress: true}, "full", "sqlite", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.c.upstream, tc.c.baseURL = "http://127.0.0.1:3000", base
			cfg, err := config.Parse(tc.name+".yaml", []byte(tc.c.yaml("127.0.0.1:4002", "127.0.0.1:4003")))
			if err != nil {
				t.Fatalf("got %v, want the config to parse", err)
			}
			if cfg.Mode != tc.mode || cfg.Database.Driver != tc.driver {
				t.Errorf("got mode %q, driver %q; want %q, %q", cfg.Mode, cfg.Database.Driver, tc.mode, tc.driver)
			}
			if cfg.NeedsSecret() != tc.needSecret {
				t.Errorf("got NeedsSecret %t, want %t", cfg.NeedsSecret(), tc.needSecret)
			}
			if got := cfg.JWTIssuer(); got != base {
				t.Errorf("got JWT issuer %q, want %q, the one base_url of every sidecar", got, base)
			}
			if cfg.Log.Access != tc.c.access {
				t.Errorf("got log.access %t, want %t", cfg.Log.Access, tc.c.access)
			}
		})
	}
}

// TestProcessTree: a child is found by name and its CPU time counts in
// its parent's tree.
func TestProcessTree(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs /proc")
	}
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Skip("needs sleep(1):", err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	if got := childNamed(os.Getpid(), "sleep"); got != cmd.Process.Pid {
		t.Errorf("childNamed(self, sleep): got %d, want %d", got, cmd.Process.Pid)
	}
	self, err := readStat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if self.ppid != os.Getppid() {
		t.Errorf("ppid: got %d, want %d", self.ppid, os.Getppid())
	}
	tree, err := treeTicks(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if tree < self.ticks {
		t.Errorf("treeTicks(self) = %d, want at least the process's own %d", tree, self.ticks)
	}
	if _, err := treeTicks(1 << 30); err == nil {
		t.Error("treeTicks of a pid that does not exist: got no error")
	}
}
