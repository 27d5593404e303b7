package issuer

import (
	"context"
	"errors"

	"github.com/authsidecar/authsidecar/passhash"
)

// checkStored checks password against the user's stored hash, whatever
// its format (hasher.check). A stored value passhash refuses (a format
// it does not read, malformed, beyond the cost bounds) is logged with
// the reason, and costs and answers what a wrong password does: the
// dummy hash runs, and the user is told nothing but "invalid", until
// the password is reset or the operator fixes the value.
func (iss *Issuer) checkStored(ctx context.Context, userID, password, stored string) (ok, foreign bool, err error) {
	ok, foreign, err = iss.hasher.check(ctx, password, stored)
	if !errors.Is(err, errRefusedHash) {
		return ok, foreign, err
	}
	iss.log.Error("stored password hash refused: the user cannot sign in with a password until it is reset",
		"user_id", userID, "reason", err.Error())
	if _, err := iss.hasher.verify(ctx, password, iss.dummyHash); err != nil {
		return false, false, err
	}
	return false, false, nil
}

// rehash hashes a password just proven against a foreign hash in the
// sidecar's own format, for the sign-in to store with its session. ""
// when no hashing slot was free in time: the sign-in goes on, and the
// next one upgrades.
func (iss *Issuer) rehash(ctx context.Context, userID, password string) string {
	h, err := iss.hasher.hash(ctx, password)
	if err != nil {
		iss.log.Warn("foreign password hash not upgraded at this sign-in", "user_id", userID, "error", err.Error())
		return ""
	}
	return h
}

// createSession stores a sign-in's session and, when rehashed is set,
// replaces the foreign hash old with it in the same transaction (only if
// it is still old: a concurrent sign-in may have upgraded it first).
func (iss *Issuer) createSession(ctx context.Context, s Session, old, rehashed string) error {
	if rehashed == "" {
		return iss.store.CreateSession(ctx, s)
	}
	replaced, err := iss.store.CreateSessionRehashed(ctx, s, old, rehashed)
	if err != nil {
		return err
	}
	if replaced {
		format := "unknown"
		if h, err := passhash.Parse(old, passhash.Options{AllowWeak: true}); err == nil {
			format = string(h.Format())
		}
		iss.log.Info("password hash upgraded to the sidecar's own", "user_id", s.UserID, "from", format)
	}
	return nil
}
