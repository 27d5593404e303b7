package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// startBare starts a bare proxy in front of the upstream; name names its
// log file. It is stopped with the benchmark's other children.
func (b *bench) startBare(ctx context.Context, name string) (target, error) {
	self, err := os.Executable()
	if err != nil {
		return target{}, err
	}
	proc, addr, err := startChild(ctx, childSpec{name: name, path: self,
		args: []string{"bare", "-listen", "127.0.0.1:0", "-upstream", b.upstream, "-idle", strconv.Itoa(max(1024, 2*b.o.Connections)),
			"-buffer-pool=" + strconv.FormatBool(b.o.BarePool)},
		log: filepath.Join(b.dir, name+".log"), announce: true})
	if err != nil {
		return target{}, err
	}
	b.procs.add(proc)
	return target{name: "bare", addr: addr, pid: proc.pid(), proc: proc}, nil
}

// startFloor starts the floor while the setup sidecar at scAddr runs: it
// reads the public key from that sidecar's JWKS once, and the kid from
// one of the tokens (every sidecar of the run signs with that key, or
// the floor answers 401 and the run shows errors).
func (b *bench) startFloor(ctx context.Context, self, scAddr string) error {
	kid, err := tokenKID(b.fx.jwts[0])
	if err != nil {
		return fmt.Errorf("floor: %w", err)
	}
	log := filepath.Join(b.dir, "floor.log")
	proc, addr, err := startChild(ctx, childSpec{name: "floor", path: self,
		args: []string{"floor", "-listen", "127.0.0.1:0", "-upstream", b.upstream, "-idle", strconv.Itoa(max(1024, 2*b.o.Connections)),
			"-buffer-pool=" + strconv.FormatBool(b.o.BarePool), "-jwks-url", "http://" + scAddr + "/api/auth/jwks", "-kid", kid},
		log: log, announce: true})
	if err != nil {
		return fmt.Errorf("%w (%s)", err, logTail(log))
	}
	b.procs.add(proc)
	b.floor = target{name: "floor", addr: addr, pid: proc.pid()}
	b.logf("floor (bare proxy + ed25519.Verify, key %s) on %s", kid, addr)
	return nil
}

// startSidecar starts a sidecar: c says its name, access log and, if not
// on the benchmark's SQLite database, its PostgreSQL URL or the JWKS URL
// of a verifier. Each scenario gets a fresh one, so the memory it reports
// is that scenario's, not the sign-up burst's (scrypt takes 32 MiB per
// hash) or another scenario's. They share the secret and base_url, so
// every JWT stays valid; a verifier gets no secret, and checks iss and aud
// against that base_url.
func (b *bench) startSidecar(ctx context.Context, c sidecarConfig) (*sidecar, error) {
	c.name = "sidecar-" + c.name
	c.upstream, c.baseURL = b.upstream, b.base
	switch {
	case c.jwksURL != "":
		c.issuer = b.base
	case c.pgURL == "":
		c.db, c.secret = b.db, b.secret
	default:
		c.secret = b.secret
	}
	sc, err := startSidecar(ctx, b.bin, b.dir, c)
	if err != nil {
		return nil, err
	}
	b.procs.add(sc.child)
	if b.base == "" {
		b.base = "http://" + sc.addr
	}
	return sc, nil
}
