package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/authsidecar/authsidecar/issuer"
)

// CreateUser inserts user, credential account and first session atomically.
// A zero session (no token) inserts none: sign-up under
// require_email_verification starts no session.
func (db *DB) CreateUser(ctx context.Context, u issuer.User, passwordHash string, s issuer.Session) error {
	db.observe(ctx, "create_user")
	return db.withTx(ctx, func(t tx) error {
		if err := insertUser(ctx, t, u); err != nil {
			return err
		}
		if err := insertCredential(ctx, t, u, passwordHash); err != nil {
			return err
		}
		if s.Token == "" {
			return nil
		}
		return insertSession(ctx, t, s)
	})
}

// insertCredential inserts u's password account. Its id is derived: it
// is never exposed and a user has exactly one.
func insertCredential(ctx context.Context, t tx, u issuer.User, passwordHash string) error {
	_, err := t.exec(ctx,
		`INSERT INTO account (id, account_id, provider_id, user_id, password, created_at, updated_at) VALUES (?, ?, 'credential', ?, ?, ?, ?)`,
		"cred_"+u.ID, u.ID, u.ID, passwordHash, ms(u.CreatedAt), ms(u.UpdatedAt))
	if err != nil {
		return fmt.Errorf("insert account: %w", err)
	}
	return nil
}

// insertUser inserts u; a taken email is issuer.ErrEmailTaken, a taken
// id issuer.ErrUserIDTaken.
func insertUser(ctx context.Context, t tx, u issuer.User) error {
	_, err := t.exec(ctx,
		`INSERT INTO "user" (id, name, email, email_verified, image, created_at, updated_at, banned, ban_reason, ban_expires, email_unclaimed) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		u.ID, u.Name, u.Email, u.EmailVerified, u.Image, ms(u.CreatedAt), ms(u.UpdatedAt), u.Ban.Banned, nullString(u.Ban.Reason), nullMS(u.Ban.Expires), u.EmailUnclaimed)
	switch {
	case t.db.dl.emailTaken(err):
		return issuer.ErrEmailTaken
	case t.db.dl.userIDTaken(err):
		return fmt.Errorf("insert user %s: %w", u.ID, issuer.ErrUserIDTaken)
	}
	if err != nil {
		return fmt.Errorf("insert user %s: %w", u.ID, err)
	}
	return nil
}

const userColumns = `u.id, u.name, u.email, u.email_verified, u.image, u.created_at, u.updated_at, u.banned, u.ban_reason, u.ban_expires, u.email_unclaimed`

// claimed is the condition of every lookup by email on a request's
// behalf: a user whose address is unclaimed (issuer.User.EmailUnclaimed)
// is never found by it.
const claimed = ` AND NOT u.email_unclaimed`

func scanUser(sc interface{ Scan(...any) error }, extra ...any) (issuer.User, error) {
	var u issuer.User
	var image, banReason sql.NullString
	var created, updated int64
	var banExpires sql.NullInt64
	dest := append([]any{&u.ID, &u.Name, &u.Email, &u.EmailVerified, &image, &created, &updated, &u.Ban.Banned, &banReason, &banExpires, &u.EmailUnclaimed}, extra...)
	if err := sc.Scan(dest...); err != nil {
		return issuer.User{}, err
	}
	if image.Valid {
		u.Image = &image.String
	}
	u.CreatedAt, u.UpdatedAt = fromMS(created), fromMS(updated)
	u.Ban.Reason, u.Ban.Expires = banReason.String, fromNullMS(banExpires)
	return u, nil
}

// nullString stores "" as NULL.
func nullString(s string) sql.NullString { return sql.NullString{String: s, Valid: s != ""} }

// CredentialByEmail returns the user with that (lower-case) email and its
// password hash.
func (db *DB) CredentialByEmail(ctx context.Context, email string) (issuer.User, string, error) {
	db.observe(ctx, "credential_by_email")
	var hash sql.NullString
	row := db.queryRow(ctx,
		`SELECT `+userColumns+`, a.password FROM "user" u
		 JOIN account a ON a.user_id = u.id AND a.provider_id = 'credential'
		 WHERE u.email = ?`+claimed, email)
	u, err := scanUser(row, &hash)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && !hash.Valid) {
		return issuer.User{}, "", issuer.ErrNotFound
	}
	if err != nil {
		return issuer.User{}, "", fmt.Errorf("user by email: %w", err)
	}
	return u, hash.String, nil
}

// PasswordHash returns the user's credential hash.
func (db *DB) PasswordHash(ctx context.Context, userID string) (string, error) {
	db.observe(ctx, "password_hash")
	var hash sql.NullString
	err := db.queryRow(ctx,
		`SELECT password FROM account WHERE user_id = ? AND provider_id = 'credential'`, userID).Scan(&hash)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && !hash.Valid) {
		return "", issuer.ErrNotFound
	}
	if err != nil {
		return "", fmt.Errorf("password hash: %w", err)
	}
	return hash.String, nil
}

// SetPassword replaces the credential hash; sessions and JWTs are kept.
func (db *DB) SetPassword(ctx context.Context, userID, hash string, now time.Time) error {
	return db.ChangePassword(ctx, userID, hash, "", false, now)
}
