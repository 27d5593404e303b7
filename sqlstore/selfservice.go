package sqlstore

import (
	"context"
	"fmt"
	"time"

	"github.com/authsidecar/authsidecar/issuer"
	"github.com/authsidecar/authsidecar/revocation"
)

// The account endpoints a signed-in user calls (change-password,
// update-user, change-email, delete-user): issuer.SessionStore, with the
// session methods in sessions.go.

// ChangePassword replaces the credential hash; with revoke, in the same
// transaction it ends every session of the user but keepToken's and
// revokes every JWT of the user up to now.
func (db *DB) ChangePassword(ctx context.Context, userID, hash, keepToken string, revoke bool, now time.Time) error {
	db.observe(ctx, "change_password")
	return db.revokeTx(ctx, func(t tx, revs *[]revocation.Record) error {
		res, err := t.exec(ctx, `UPDATE account SET password = ?, updated_at = ? WHERE user_id = ? AND provider_id = 'credential'`, hash, ms(now), userID)
		if err != nil {
			return fmt.Errorf("set password: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("set password: %w", err)
		} else if n == 0 {
			return issuer.ErrNotFound
		}
		if !revoke {
			return nil
		}
		_, err = endUser(ctx, t, revs, userID, keepToken, now)
		return err
	})
}

// UpdateUser sets the name and the image and returns the user as it is.
func (db *DB) UpdateUser(ctx context.Context, userID string, name *string, image **string, now time.Time) (issuer.User, error) {
	db.observe(ctx, "update_user")
	var u issuer.User
	err := db.withTx(ctx, func(t tx) error {
		set, args := `updated_at = ?`, []any{ms(now)}
		if name != nil {
			set, args = set+`, name = ?`, append(args, *name)
		}
		if image != nil {
			set, args = set+`, image = ?`, append(args, *image)
		}
		res, err := t.exec(ctx, `UPDATE "user" SET `+set+` WHERE id = ?`, append(args, userID)...)
		if err != nil {
			return fmt.Errorf("update user: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("update user: %w", err)
		} else if n == 0 {
			return issuer.ErrNotFound
		}
		u, err = lockUser(ctx, t, userID)
		return err
	})
	return u, err
}

// SetEmail changes the user's address, unverified.
func (db *DB) SetEmail(ctx context.Context, userID, email string, now time.Time) (issuer.User, error) {
	db.observe(ctx, "set_email")
	var u issuer.User
	err := db.withTx(ctx, func(t tx) error {
		res, err := t.exec(ctx, `UPDATE "user" SET email = ?, email_verified = ?, updated_at = ? WHERE id = ?`, email, false, ms(now), userID)
		if t.db.dl.emailTaken(err) {
			return issuer.ErrEmailTaken
		}
		if err != nil {
			return fmt.Errorf("set email: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("set email: %w", err)
		} else if n == 0 {
			return issuer.ErrNotFound
		}
		u, err = lockUser(ctx, t, userID)
		return err
	})
	return u, err
}

// DeleteUser deletes the user (its sessions, accounts, roles and tokens go
// with it: ON DELETE CASCADE) and revokes every JWT of the user up to now.
func (db *DB) DeleteUser(ctx context.Context, userID string, now time.Time) error {
	db.observe(ctx, "delete_user")
	return db.revokeTx(ctx, func(t tx, revs *[]revocation.Record) error {
		if _, err := endUser(ctx, t, revs, userID, "", now); err != nil {
			return err
		}
		res, err := t.exec(ctx, `DELETE FROM "user" WHERE id = ?`, userID)
		if err != nil {
			return fmt.Errorf("delete user: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("delete user: %w", err)
		} else if n == 0 {
			return issuer.ErrNotFound
		}
		return nil
	})
}

// The operator's levers ("users revoke", "users ban", "users unban"); an
// unknown email is issuer.ErrNotFound. Each works against a running fleet:
// every process's poller applies the revocation within its interval.

// RevokeUserByEmail ends every session of the user and revokes every JWT
// of the user issued up to now: sign-out everywhere. It returns the user
// and how many sessions ended.
func (db *DB) RevokeUserByEmail(ctx context.Context, email string, now time.Time) (issuer.User, int, error) {
	db.observe(ctx, "revoke_user")
	return db.endUser(ctx, email, now, nil)
}

// BanUserByEmail bans the user until expires (zero: for good) with reason,
// ends every session and revokes every JWT of the user up to now.
func (db *DB) BanUserByEmail(ctx context.Context, email, reason string, expires, now time.Time) (issuer.User, int, error) {
	db.observe(ctx, "ban_user")
	return db.endUser(ctx, email, now, func(t tx, id string) error {
		_, err := t.exec(ctx, `UPDATE "user" SET banned = ?, ban_reason = ?, ban_expires = ?, updated_at = ? WHERE id = ?`,
			true, nullString(reason), nullMS(expires), ms(now), id)
		if err != nil {
			return fmt.Errorf("ban user: %w", err)
		}
		return nil
	})
}

// endUser is RevokeUserByEmail, after which also runs in its transaction.
func (db *DB) endUser(ctx context.Context, email string, now time.Time, also func(t tx, id string) error) (issuer.User, int, error) {
	var u issuer.User
	n := 0
	err := db.revokeTx(ctx, func(t tx, revs *[]revocation.Record) error {
		id, err := userIDByEmail(ctx, t, email)
		if err != nil {
			return err
		}
		if also != nil {
			if err := also(t, id); err != nil {
				return err
			}
		}
		if n, err = endUser(ctx, t, revs, id, "", now); err != nil {
			return err
		}
		u, err = lockUser(ctx, t, id)
		return err
	})
	if err != nil {
		return issuer.User{}, 0, err
	}
	return u, n, nil
}

// UnbanUserByEmail lifts the user's ban; wasBanned is false when it had
// none in force. Nothing is revoked or restored: the user signs in again.
func (db *DB) UnbanUserByEmail(ctx context.Context, email string, now time.Time) (u issuer.User, wasBanned bool, err error) {
	db.observe(ctx, "unban_user")
	err = db.withTx(ctx, func(t tx) error {
		id, err := userIDByEmail(ctx, t, email)
		if err != nil {
			return err
		}
		before, err := lockUser(ctx, t, id)
		if err != nil {
			return err
		}
		wasBanned = before.Ban.Active(now)
		if _, err := t.exec(ctx, `UPDATE "user" SET banned = ?, ban_reason = NULL, ban_expires = NULL, updated_at = ? WHERE id = ?`, false, ms(now), id); err != nil {
			return fmt.Errorf("unban user: %w", err)
		}
		u, err = lockUser(ctx, t, id)
		return err
	})
	return u, wasBanned, err
}
