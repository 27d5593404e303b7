package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/authsidecar/authsidecar/issuer"
	"github.com/authsidecar/authsidecar/revocation"
)

// The methods in this file serve the admin CLI, not requests. Emails are
// matched exactly: pass them lower-cased, as they are stored. An unknown
// email is issuer.ErrNotFound.

// UserByEmail returns the user who claims that email: never one whose
// address is unclaimed (issuer.User.EmailUnclaimed). The issuer's lookup
// (linking by email); an operator's is OperatorUserByEmail.
func (db *DB) UserByEmail(ctx context.Context, email string) (issuer.User, error) {
	db.observe(ctx, "user_by_email")
	u, err := scanUser(db.queryRow(ctx, `SELECT `+userColumns+` FROM "user" u WHERE u.email = ?`+claimed, email))
	if errors.Is(err, sql.ErrNoRows) {
		return issuer.User{}, issuer.ErrNotFound
	}
	if err != nil {
		return issuer.User{}, fmt.Errorf("user by email: %w", err)
	}
	return u, nil
}

// OperatorUserByEmail returns the user an operator names by email (the
// admin commands): the one who claims the address, else the only user
// showing it unclaimed. ErrAmbiguousEmail when several do and none
// claims it.
func (db *DB) OperatorUserByEmail(ctx context.Context, email string) (issuer.User, error) {
	db.observe(ctx, "user_by_email")
	var u issuer.User
	err := db.withTx(ctx, func(t tx) error {
		id, err := userIDByEmail(ctx, t, email)
		if err != nil {
			return err
		}
		u, err = lockUser(ctx, t, id)
		return err
	})
	return u, err
}

// ErrAmbiguousEmail: no user claims the address, and several show it
// unclaimed (each signed in with an identity provider that did not verify
// it), so an email does not say which one an operator means.
var ErrAmbiguousEmail = errors.New("several users show this address unclaimed and none claims it")

// UserByID returns the user with that id.
func (db *DB) UserByID(ctx context.Context, id string) (issuer.User, error) {
	db.observe(ctx, "user_by_id")
	u, err := scanUser(db.queryRow(ctx, `SELECT `+userColumns+` FROM "user" u WHERE u.id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return issuer.User{}, issuer.ErrNotFound
	}
	if err != nil {
		return issuer.User{}, fmt.Errorf("user by id: %w", err)
	}
	return u, nil
}

// Users returns every user, oldest first, with its sessions still live at
// now.
func (db *DB) Users(ctx context.Context, now time.Time) ([]issuer.UserSummary, error) {
	db.observe(ctx, "list_users")
	rows, err := db.query(ctx,
		`SELECT `+userColumns+`, (SELECT count(*) FROM session s WHERE s.user_id = u.id AND s.expires_at > ?)
		 FROM "user" u ORDER BY u.created_at, u.email`, ms(now))
	if err != nil {
		return nil, fmt.Errorf("list users: %w", err)
	}
	defer rows.Close()
	var out []issuer.UserSummary
	for rows.Next() {
		var s issuer.UserSummary
		if s.User, err = scanUser(rows, &s.LiveSessions); err != nil {
			return nil, fmt.Errorf("scan user: %w", err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list users: %w", err)
	}
	return out, nil
}

// DeleteUserByEmail deletes the user; its sessions, roles and accounts go
// with it (ON DELETE CASCADE; Open turns foreign keys on), and every JWT
// issued to it up to now is revoked in the same transaction.
func (db *DB) DeleteUserByEmail(ctx context.Context, email string, now time.Time) (issuer.DeletedUser, error) {
	db.observe(ctx, "delete_user")
	var d issuer.DeletedUser
	err := db.revokeTx(ctx, func(t tx, revs *[]revocation.Record) error {
		id, err := userIDByEmail(ctx, t, email)
		if err != nil {
			return err
		}
		if d.User, err = lockUser(ctx, t, id); err != nil {
			return err
		}
		err = t.queryRow(ctx,
			`SELECT (SELECT count(*) FROM session WHERE user_id = ?), (SELECT count(*) FROM user_role WHERE user_id = ?)`,
			d.User.ID, d.User.ID).Scan(&d.Sessions, &d.Roles)
		if err != nil {
			return fmt.Errorf("count user rows: %w", err)
		}
		if _, err := endUser(ctx, t, revs, d.User.ID, "", now); err != nil {
			return err
		}
		if _, err := t.exec(ctx, `DELETE FROM "user" WHERE id = ?`, d.User.ID); err != nil {
			return fmt.Errorf("delete user: %w", err)
		}
		return nil
	})
	if err != nil {
		return issuer.DeletedUser{}, err
	}
	return d, nil
}

// GrantRoleByEmail gives the user the role; added is false when the user
// already held it.
func (db *DB) GrantRoleByEmail(ctx context.Context, email, role string, now time.Time) (added bool, err error) {
	db.observe(ctx, "grant_role")
	err = db.withTx(ctx, func(t tx) error {
		id, err := userIDByEmail(ctx, t, email)
		if err != nil {
			return err
		}
		res, err := t.exec(ctx,
			`INSERT INTO user_role (user_id, role, created_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`, id, role, ms(now))
		if err != nil {
			return fmt.Errorf("grant role: %w", err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return fmt.Errorf("grant role: %w", err)
		}
		added = n > 0
		return nil
	})
	return added, err
}

// RevokeRoleByEmail takes the role from the user; removed is false when
// the user did not hold it.
func (db *DB) RevokeRoleByEmail(ctx context.Context, email, role string) (removed bool, err error) {
	db.observe(ctx, "revoke_role")
	err = db.withTx(ctx, func(t tx) error {
		id, err := userIDByEmail(ctx, t, email)
		if err != nil {
			return err
		}
		res, err := t.exec(ctx, `DELETE FROM user_role WHERE user_id = ? AND role = ?`, id, role)
		if err != nil {
			return fmt.Errorf("revoke role: %w", err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return fmt.Errorf("revoke role: %w", err)
		}
		removed = n > 0
		return nil
	})
	return removed, err
}

// userIDByEmail is the id of the user an operator names by email (see
// OperatorUserByEmail): the claiming user sorts first, and a second row
// only matters when neither claims the address.
func userIDByEmail(ctx context.Context, t tx, email string) (string, error) {
	return t.db.userIDByEmail(ctx, t.Tx, email)
}

func (db *DB) userIDByEmail(ctx context.Context, q interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}, email string) (string, error) {
	rows, err := q.QueryContext(ctx, db.q(`SELECT id, email_unclaimed FROM "user" WHERE email = ? ORDER BY email_unclaimed, created_at`), email)
	if err != nil {
		return "", fmt.Errorf("user by email: %w", err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		var unclaimed bool
		if err := rows.Scan(&id, &unclaimed); err != nil {
			return "", fmt.Errorf("user by email: %w", err)
		}
		if !unclaimed {
			return id, nil
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return "", fmt.Errorf("user by email: %w", err)
	}
	switch len(ids) {
	case 0:
		return "", issuer.ErrNotFound
	case 1:
		return ids[0], nil
	}
	return "", fmt.Errorf("%w: ids %s", ErrAmbiguousEmail, strings.Join(ids, ", "))
}

// RoleGrants returns the granted roles ordered by email and role: every
// user's when email is empty, else that user's (none is an empty list, an
// unknown email issuer.ErrNotFound).
func (db *DB) RoleGrants(ctx context.Context, email string) ([]issuer.RoleGrant, error) {
	db.observe(ctx, "list_roles")
	// The LEFT JOIN tells "no such user" (no row) from "no roles" (one row
	// with a NULL role) in one query.
	q := `SELECT u.id, u.email, r.role, r.created_at FROM user_role r JOIN "user" u ON u.id = r.user_id ORDER BY u.email, r.role`
	var args []any
	if email != "" {
		id, err := db.userIDByEmail(ctx, db.r, email)
		if err != nil {
			return nil, err
		}
		q = `SELECT u.id, u.email, r.role, r.created_at FROM "user" u LEFT JOIN user_role r ON r.user_id = u.id WHERE u.id = ? ORDER BY r.role`
		args = append(args, id)
	}
	rows, err := db.query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list roles: %w", err)
	}
	defer rows.Close()
	out := []issuer.RoleGrant{}
	found := false
	for rows.Next() {
		found = true
		var g issuer.RoleGrant
		var role sql.NullString
		var created sql.NullInt64
		if err := rows.Scan(&g.UserID, &g.Email, &role, &created); err != nil {
			return nil, fmt.Errorf("scan role: %w", err)
		}
		if !role.Valid {
			continue
		}
		g.Role, g.CreatedAt = role.String, fromNullMS(created)
		out = append(out, g)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list roles: %w", err)
	}
	if email != "" && !found {
		return nil, issuer.ErrNotFound
	}
	return out, nil
}

// Backup writes a consistent copy of the database to path with VACUUM
// INTO, on a read connection: under WAL it reads one snapshot and blocks
// no writer, so it is safe while serving. path must not exist: it is
// created with mode 0600 (it holds password hashes and encrypted keys)
// and removed again if the copy fails.
func (db *DB) Backup(ctx context.Context, path string) error {
	db.observe(ctx, "backup")
	if db.dl != sqliteDialect {
		return errors.New("backup: only SQLite databases are backed up by authsidecar; use pg_dump for PostgreSQL")
	}
	// Absolute, so SQLite never reads it as a "file:" URI.
	abs, err := filepath.Abs(path)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	// O_EXCL refuses an existing file atomically; VACUUM INTO accepts the
	// empty file and keeps its mode.
	f, err := os.OpenFile(abs, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return fmt.Errorf("backup: %s already exists: refusing to overwrite it", path)
	}
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	if err := f.Close(); err != nil {
		os.Remove(abs)
		return fmt.Errorf("backup: %w", err)
	}
	if _, err := db.r.ExecContext(ctx, `VACUUM INTO ?`, abs); err != nil {
		os.Remove(abs)
		return fmt.Errorf("backup: vacuum into %s: %w", path, err)
	}
	// A backup that is not on disk is no backup.
	if err := syncFile(abs); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	return nil
}

func syncFile(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
