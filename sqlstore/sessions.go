package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/authsidecar/authsidecar/issuer"
)

// execer is *DB or tx: both run "?" queries in the engine's syntax.
type execer interface {
	exec(ctx context.Context, query string, args ...any) (sql.Result, error)
}

func insertSession(ctx context.Context, ex execer, s issuer.Session) error {
	_, err := ex.exec(ctx,
		`INSERT INTO session (id, token, user_id, expires_at, created_at, updated_at, ip_address, user_agent, remember)
		 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		s.ID, s.Token, s.UserID, ms(s.ExpiresAt), ms(s.CreatedAt), ms(s.UpdatedAt), s.IPAddress, s.UserAgent, s.Remember)
	if err != nil {
		return fmt.Errorf("insert session: %w", err)
	}
	return nil
}

// CreateSession stores a new session.
func (db *DB) CreateSession(ctx context.Context, s issuer.Session) error {
	db.observe(ctx, "create_session")
	return insertSession(ctx, db, s)
}

// SessionByToken returns the session with that token and its user, in one
// query.
func (db *DB) SessionByToken(ctx context.Context, token string) (issuer.Session, issuer.User, error) {
	db.observe(ctx, "session_by_token")
	var sr sessionRow
	row := db.queryRow(ctx,
		`SELECT `+userColumns+`, `+sessionColumns+`
		 FROM session s JOIN "user" u ON u.id = s.user_id WHERE s.token = ?`, token)
	u, err := scanUser(row, sr.dest()...)
	if errors.Is(err, sql.ErrNoRows) {
		return issuer.Session{}, issuer.User{}, issuer.ErrNotFound
	}
	if err != nil {
		return issuer.Session{}, issuer.User{}, fmt.Errorf("session by token: %w", err)
	}
	return sr.session(), u, nil
}

const sessionColumns = `s.id, s.token, s.user_id, s.expires_at, s.created_at, s.updated_at, s.ip_address, s.user_agent, s.remember`

// sessionRow receives sessionColumns.
type sessionRow struct {
	s                     issuer.Session
	exp, created, updated int64
}

func (r *sessionRow) dest() []any {
	return []any{&r.s.ID, &r.s.Token, &r.s.UserID, &r.exp, &r.created, &r.updated, &r.s.IPAddress, &r.s.UserAgent, &r.s.Remember}
}

func (r *sessionRow) session() issuer.Session {
	r.s.ExpiresAt, r.s.CreatedAt, r.s.UpdatedAt = fromMS(r.exp), fromMS(r.created), fromMS(r.updated)
	return r.s
}

func scanSession(rows *sql.Rows) (issuer.Session, error) {
	var sr sessionRow
	err := rows.Scan(sr.dest()...)
	return sr.session(), err
}

// ExtendSession moves a session's expiry.
func (db *DB) ExtendSession(ctx context.Context, id string, expiresAt, now time.Time) error {
	db.observe(ctx, "extend_session")
	if _, err := db.exec(ctx, `UPDATE session SET expires_at = ?, updated_at = ? WHERE id = ?`, ms(expiresAt), ms(now), id); err != nil {
		return fmt.Errorf("extend session: %w", err)
	}
	return nil
}

// DeleteSession deletes the session with that token, if any.
func (db *DB) DeleteSession(ctx context.Context, token string) error {
	db.observe(ctx, "delete_session")
	if _, err := db.exec(ctx, `DELETE FROM session WHERE token = ?`, token); err != nil {
		return fmt.Errorf("delete session: %w", err)
	}
	return nil
}

// DeleteOtherSessions deletes the user's sessions except keepToken.
func (db *DB) DeleteOtherSessions(ctx context.Context, userID, keepToken string) error {
	db.observe(ctx, "delete_other_sessions")
	if _, err := db.exec(ctx, `DELETE FROM session WHERE user_id = ? AND token <> ?`, userID, keepToken); err != nil {
		return fmt.Errorf("delete other sessions: %w", err)
	}
	return nil
}
