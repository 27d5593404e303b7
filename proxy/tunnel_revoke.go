package proxy

import (
	"errors"

	"github.com/authsidecar/authsidecar/revocation"
)

// A tunnel opened with a token that is revoked later ends as an expired
// one does (tunnel.go), at once: close frames 1008 "token revoked" both
// ways between two frames, then both connections closed within
// wsCloseWait. A watcher goroutine per tunnel waits for the revocation set
// to change and checks the token again; the bound is the set's, the one
// business requests meet.

// watchRevocation checks tok at every change of revs until the tunnel has
// ended, and revokes the tunnel when tok is revoked. A set that cannot
// judge tokens (a verifier's feed down past its bound) closes nothing: the
// token was good when the tunnel opened, and new requests get the 503.
func (t *wsTunnel) watchRevocation(revs Revocations, tok revocation.Token) {
	for {
		changed := revs.Changed()
		if errors.Is(revs.Check(tok), revocation.ErrRevoked) {
			t.revoke()
			return
		}
		select {
		case <-changed:
		case <-t.stopped:
			return
		}
	}
}

// revoke ends the tunnel now, as its deadline would, saying why.
func (t *wsTunnel) revoke() {
	t.mu.Lock()
	if t.done || t.expired.Load() {
		t.mu.Unlock()
		return
	}
	t.revoked.Store(true)
	t.mu.Unlock()
	t.expire()
}
