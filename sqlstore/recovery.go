package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/authsidecar/authsidecar/issuer"
	"github.com/authsidecar/authsidecar/mail"
	"github.com/authsidecar/authsidecar/revocation"
)

// Recovery tokens (password reset, email verification) are stored as their
// SHA-256 only, so the database never holds a usable link; the mail that
// carries the link is queued in the outbox (outbox.go) in the token's own
// transaction.
//
// Locking, on PostgreSQL: every transaction here locks the user's row
// before it touches the user's tokens (spendToken reads the token's user
// without a lock first), as DeleteUserByEmail's delete of the user row
// does before its cascade. One order everywhere means no deadlock, and it
// serializes two requests for the same user: without it, two reset
// requests at once would each delete the other's older tokens before
// either committed, and both new links would stay valid. SQLite's write
// transactions are serialized anyway.

// IssueRecoveryToken, in one transaction: deletes every other token of the
// same kind of t.UserID (a new link replaces older ones), inserts t, and
// inserts the outbox row q as pending, due at q.CreatedAt, with no
// attempts (q's State, Attempts and NextAttemptAt are not read). A zero
// q (no ID) queues nothing: the token alone, for a link an operator
// prints. Otherwise t.Kind and q.Kind must be the same (a change of
// address, issuer.KindChangeEmail, goes as mail.EmailVerification) and q
// needs a sealed payload. An unknown user is issuer.ErrNotFound. Expired tokens of every user are
// swept now and then afterwards, t.CreatedAt being "now".
func (db *DB) IssueRecoveryToken(ctx context.Context, t issuer.RecoveryToken, q mail.Queued) error {
	db.observe(ctx, "issue_recovery_token")
	// No message (q.ID empty) is an operator's link ("users reset-link"),
	// printed rather than mailed.
	mailed := q.ID != ""
	// A change of address is mailed as a verification of the new one.
	sameKind := t.Kind == q.Kind || (t.Kind == issuer.KindChangeEmail && q.Kind == mail.EmailVerification)
	if t.Kind == "" || (mailed && !sameKind) {
		return fmt.Errorf("issue recovery token: token kind %q and message kind %q: want the same kind", t.Kind, q.Kind)
	}
	if mailed && len(q.Sealed) == 0 {
		return errors.New("issue recovery token: the message needs a sealed payload")
	}
	q.State, q.Attempts, q.NextAttemptAt, q.LastError, q.DeliveredAt = outboxPending, 0, q.CreatedAt, "", time.Time{}
	err := db.withTx(ctx, func(w tx) error {
		if _, err := lockUser(ctx, w, t.UserID); err != nil {
			return err
		}
		if _, err := w.exec(ctx, `DELETE FROM recovery_token WHERE user_id = ? AND kind = ?`, t.UserID, string(t.Kind)); err != nil {
			return fmt.Errorf("delete older recovery tokens: %w", err)
		}
		if err := insertRecoveryToken(ctx, w, t); err != nil {
			return err
		}
		if !mailed {
			return nil
		}
		return insertOutbox(ctx, w, q)
	})
	// Outside the transaction, as TakeToken's sweep and for its reasons;
	// a failed sweep is the next one's work.
	if err == nil && db.issues.Add(1)%sweepEvery == 0 {
		db.exec(ctx, `DELETE FROM recovery_token WHERE hash IN (SELECT hash FROM recovery_token WHERE expires_at <= ?`+db.dl.skipLocked+`)`, ms(t.CreatedAt))
	}
	return err
}

func insertRecoveryToken(ctx context.Context, ex execer, t issuer.RecoveryToken) error {
	_, err := ex.exec(ctx,
		`INSERT INTO recovery_token (hash, kind, user_id, email, expires_at, created_at) VALUES (?, ?, ?, ?, ?, ?)`,
		t.Hash[:], string(t.Kind), t.UserID, t.Email, ms(t.ExpiresAt), ms(t.CreatedAt))
	if err != nil {
		return fmt.Errorf("insert recovery token: %w", err)
	}
	return nil
}

// lockUser reads the user's row, locked for the rest of the transaction
// on PostgreSQL. A missing user is issuer.ErrNotFound.
func lockUser(ctx context.Context, t tx, id string) (issuer.User, error) {
	u, err := scanUser(t.queryRow(ctx, `SELECT `+userColumns+` FROM "user" u WHERE u.id = ?`+t.db.dl.forUpdate, id))
	if errors.Is(err, sql.ErrNoRows) {
		return issuer.User{}, issuer.ErrNotFound
	}
	if err != nil {
		return issuer.User{}, fmt.Errorf("lock user: %w", err)
	}
	return u, nil
}

// ResetTokenValid reports whether a password-reset token with this hash
// exists and expires after now. It does not spend it.
func (db *DB) ResetTokenValid(ctx context.Context, hash [32]byte, now time.Time) (bool, error) {
	db.observe(ctx, "reset_token_valid")
	var n int
	err := db.queryRow(ctx, `SELECT count(*) FROM recovery_token WHERE hash = ? AND kind = ? AND expires_at > ?`,
		hash[:], string(mail.PasswordReset), ms(now)).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("reset token valid: %w", err)
	}
	return n > 0, nil
}

// spendToken deletes the token of that hash and kind and returns it with
// its user, whose row it locks first (see the locking note above).
// issuer.ErrNotFound when there is no such token, or another transaction
// spent it first. An expired token is deleted and returned all the same:
// the caller commits the delete and refuses it.
func spendToken(ctx context.Context, t tx, hash [32]byte, kind mail.Kind) (issuer.User, issuer.RecoveryToken, error) {
	tok := issuer.RecoveryToken{Hash: hash, Kind: kind}
	err := t.queryRow(ctx, `SELECT user_id FROM recovery_token WHERE hash = ? AND kind = ?`, hash[:], string(kind)).Scan(&tok.UserID)
	if errors.Is(err, sql.ErrNoRows) {
		return issuer.User{}, tok, issuer.ErrNotFound
	}
	if err != nil {
		return issuer.User{}, tok, fmt.Errorf("read recovery token: %w", err)
	}
	u, err := lockUser(ctx, t, tok.UserID)
	if err != nil {
		// Gone with its user (ON DELETE CASCADE): not found.
		return issuer.User{}, tok, err
	}
	// Under the user's lock no other spender of this token can be midway:
	// the delete finds the row, or finds that one already committed.
	var exp, created int64
	err = t.queryRow(ctx, `DELETE FROM recovery_token WHERE hash = ? AND kind = ? RETURNING email, expires_at, created_at`,
		hash[:], string(kind)).Scan(&tok.Email, &exp, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return issuer.User{}, tok, issuer.ErrNotFound
	}
	if err != nil {
		return issuer.User{}, tok, fmt.Errorf("spend recovery token: %w", err)
	}
	tok.ExpiresAt, tok.CreatedAt = fromMS(exp), fromMS(created)
	return u, tok, nil
}

// ResetPassword, in one transaction: spends the password-reset token
// (issuer.ErrNotFound when it is missing or expired, or the user's address
// is unclaimed; such a token is deleted all the same), deletes every
// other reset token of its user, writes passwordHash into the user's
// credential account (creating it, as CreateUser does, when the user has
// none: a user who only ever signed in otherwise gains a password), sets
// email_verified (the user read mail sent to the address) and updated_at,
// removes the user's provider accounts when the address was not verified
// before (issuer.Proof), and when revokeSessions deletes every session of
// the user and revokes every JWT of the user issued up to now.
func (db *DB) ResetPassword(ctx context.Context, hash [32]byte, passwordHash string, revokeSessions bool, now time.Time) (issuer.User, issuer.Proof, error) {
	db.observe(ctx, "reset_password")
	var u issuer.User
	var p issuer.Proof
	var refused error
	err := db.revokeTx(ctx, func(t tx, revs *[]revocation.Record) error {
		var tok issuer.RecoveryToken
		var err error
		u, tok, err = spendToken(ctx, t, hash, mail.PasswordReset)
		if err != nil {
			return err
		}
		if !tok.ExpiresAt.After(now) || u.EmailUnclaimed {
			// Commit the delete of the token; refuse it after.
			refused = issuer.ErrNotFound
			return nil
		}
		if _, err := t.exec(ctx, `DELETE FROM recovery_token WHERE user_id = ? AND kind = ?`, u.ID, string(mail.PasswordReset)); err != nil {
			return fmt.Errorf("delete other reset tokens: %w", err)
		}
		res, err := t.exec(ctx, `UPDATE account SET password = ?, updated_at = ? WHERE user_id = ? AND provider_id = 'credential'`,
			passwordHash, ms(now), u.ID)
		if err != nil {
			return fmt.Errorf("set password: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("set password: %w", err)
		} else if n == 0 {
			// CreateUser's credential account: derived id, account_id the
			// user id.
			if _, err := t.exec(ctx,
				`INSERT INTO account (id, account_id, provider_id, user_id, password, created_at, updated_at) VALUES (?, ?, 'credential', ?, ?, ?, ?)`,
				"cred_"+u.ID, u.ID, u.ID, passwordHash, ms(now), ms(now)); err != nil {
				return fmt.Errorf("insert credential account: %w", err)
			}
		}
		if p, err = prove(ctx, t, &u, now); err != nil {
			return err
		}
		if revokeSessions {
			n, err := endUser(ctx, t, revs, u.ID, "", now)
			if err != nil {
				return fmt.Errorf("revoke sessions: %w", err)
			}
			p.SessionsEnded = n
		}
		return nil
	})
	if err == nil {
		err = refused
	}
	if err != nil {
		return issuer.User{}, issuer.Proof{}, err
	}
	return u, p, nil
}

// prove marks u's address verified, in t. When it was not verified
// before, it also removes u's provider accounts: they were linked before
// anyone proved the address (issuer.Proof). u is updated.
func prove(ctx context.Context, t tx, u *issuer.User, now time.Time) (issuer.Proof, error) {
	p := issuer.Proof{WasVerified: u.EmailVerified}
	if p.WasVerified {
		return p, nil
	}
	var err error
	if p.Unlinked, err = unlinkProviders(ctx, t, u.ID); err != nil {
		return p, err
	}
	if _, err := t.exec(ctx, `UPDATE "user" SET email_verified = ?, updated_at = ? WHERE id = ?`, true, ms(now), u.ID); err != nil {
		return p, fmt.Errorf("set email verified: %w", err)
	}
	u.EmailVerified, u.UpdatedAt = true, fromMS(ms(now))
	return p, nil
}

// unlinkProviders deletes the user's provider accounts (every account but
// the password's) and returns their provider ids, sorted.
func unlinkProviders(ctx context.Context, t tx, userID string) ([]string, error) {
	ids, err := queryStrings(ctx, t, `DELETE FROM account WHERE user_id = ? AND provider_id <> 'credential' RETURNING provider_id`, userID)
	if err != nil {
		return nil, fmt.Errorf("remove provider accounts: %w", err)
	}
	slices.Sort(ids)
	return ids, nil
}

// VerifyEmail, in one transaction: spends the verification token
// (issuer.ErrNotFound when it is missing or expired), checks its user
// still has the address it was sent to (case-insensitive) and that the
// address is not unclaimed (issuer.ErrNotFound otherwise), sets
// email_verified and updated_at and removes the user's provider accounts
// unless it was verified already (issuer.Proof), and deletes the user's
// other verification tokens. A token refused for expiry or a changed
// address is deleted all the same: it can never succeed later (an address
// changed back included). u is the user as it now is. When the address
// was not verified before and signIn is not nil, the same transaction
// inserts *signIn as a session of the token's user (its UserID set to
// them): the sign-in a verification grants happens with it, or the token
// is not spent. A banned user gets no session.
//
// A change-of-address token (issuer.KindChangeEmail) moves the user to
// the address it was sent to, verified, removing the user's provider
// accounts, unless another user has taken that address since
// (issuer.ErrNotFound, the token spent). It signs nobody in: WasVerified
// is then true.
func (db *DB) VerifyEmail(ctx context.Context, hash [32]byte, now time.Time, signIn *issuer.Session) (issuer.User, issuer.Proof, error) {
	db.observe(ctx, "verify_email")
	var u issuer.User
	var p issuer.Proof
	var refused error
	err := db.withTx(ctx, func(t tx) error {
		var kind string
		err := t.queryRow(ctx, `SELECT kind FROM recovery_token WHERE hash = ?`, hash[:]).Scan(&kind)
		if errors.Is(err, sql.ErrNoRows) || (err == nil && mail.Kind(kind) != mail.EmailVerification && mail.Kind(kind) != issuer.KindChangeEmail) {
			return issuer.ErrNotFound
		}
		if err != nil {
			return fmt.Errorf("read recovery token: %w", err)
		}
		var tok issuer.RecoveryToken
		u, tok, err = spendToken(ctx, t, hash, mail.Kind(kind))
		if err != nil {
			return err
		}
		if !tok.ExpiresAt.After(now) {
			refused = issuer.ErrNotFound
			return nil
		}
		if tok.Kind == issuer.KindChangeEmail {
			p, err = changeEmail(ctx, t, &u, tok, now, &refused)
			return err
		}
		if !strings.EqualFold(u.Email, tok.Email) || u.EmailUnclaimed {
			refused = issuer.ErrNotFound
			return nil
		}
		if p, err = prove(ctx, t, &u, now); err != nil {
			return err
		}
		if !p.WasVerified && signIn != nil && !u.Ban.Active(now) {
			ns := *signIn
			ns.UserID = u.ID
			if err := insertSession(ctx, t, ns); err != nil {
				return fmt.Errorf("sign in after verification: %w", err)
			}
		}
		if _, err := t.exec(ctx, `DELETE FROM recovery_token WHERE user_id = ? AND kind = ?`, u.ID, string(mail.EmailVerification)); err != nil {
			return fmt.Errorf("delete other verification tokens: %w", err)
		}
		return nil
	})
	if err == nil {
		err = refused
	}
	if err != nil {
		return issuer.User{}, issuer.Proof{}, err
	}
	return u, p, nil
}

// changeEmail moves u to the address of the spent change-of-address token
// tok, verified, and deletes u's other such tokens; when the address is
// another user's now, it refuses the token instead.
func changeEmail(ctx context.Context, t tx, u *issuer.User, tok issuer.RecoveryToken, now time.Time, refused *error) (issuer.Proof, error) {
	p := issuer.Proof{WasVerified: true}
	var taken int
	if err := t.queryRow(ctx, `SELECT count(*) FROM "user" u WHERE u.email = ? AND u.id <> ?`+claimed, tok.Email, u.ID).Scan(&taken); err != nil {
		return p, fmt.Errorf("change email: %w", err)
	}
	if taken > 0 {
		*refused = issuer.ErrNotFound
		return p, nil
	}
	// The new address is proven here for the first time, whatever the
	// old one was: accounts linked before are removed (issuer.Proof).
	var err error
	if p.Unlinked, err = unlinkProviders(ctx, t, u.ID); err != nil {
		return p, err
	}
	if _, err := t.exec(ctx, `UPDATE "user" SET email = ?, email_verified = ?, email_unclaimed = ?, updated_at = ? WHERE id = ?`, tok.Email, true, false, ms(now), u.ID); err != nil {
		return p, fmt.Errorf("change email: %w", err)
	}
	u.Email, u.EmailVerified, u.EmailUnclaimed, u.UpdatedAt = tok.Email, true, false, fromMS(ms(now))
	if _, err := t.exec(ctx, `DELETE FROM recovery_token WHERE user_id = ? AND kind = ?`, u.ID, string(issuer.KindChangeEmail)); err != nil {
		return p, fmt.Errorf("delete other change-of-address tokens: %w", err)
	}
	return p, nil
}
