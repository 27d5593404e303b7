package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/authsidecar/authsidecar/issuer"
)

func insertSession(ctx context.Context, ex interface {
	ExecContext(context.Context, string, ...any) (sql.Result, error)
}, s issuer.Session) error {
	_, err := ex.ExecContext(ctx,
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
	return insertSession(ctx, db.w, s)
}

// SessionByToken returns the session with that token and its user, in one
// query.
func (db *DB) SessionByToken(ctx context.Context, token string) (issuer.Session, issuer.User, error) {
	db.observe(ctx, "session_by_token")
	var s issuer.Session
	var exp, created, updated int64
	row := db.r.QueryRowContext(ctx,
		`SELECT `+userColumns+`, s.id, s.token, s.user_id, s.expires_at, s.created_at, s.updated_at, s.ip_address, s.user_agent, s.remember
		 FROM session s JOIN "user" u ON u.id = s.user_id WHERE s.token = ?`, token)
	u, err := scanUser(row, &s.ID, &s.Token, &s.UserID, &exp, &created, &updated, &s.IPAddress, &s.UserAgent, &s.Remember)
	if errors.Is(err, sql.ErrNoRows) {
		return issuer.Session{}, issuer.User{}, issuer.ErrNotFound
	}
	if err != nil {
		return issuer.Session{}, issuer.User{}, fmt.Errorf("session by token: %w", err)
	}
	s.ExpiresAt, s.CreatedAt, s.UpdatedAt = fromMS(exp), fromMS(created), fromMS(updated)
	return s, u, nil
}

// ExtendSession moves a session's expiry.
func (db *DB) ExtendSession(ctx context.Context, id string, expiresAt, now time.Time) error {
	db.observe(ctx, "extend_session")
	if _, err := db.w.ExecContext(ctx, `UPDATE session SET expires_at = ?, updated_at = ? WHERE id = ?`, ms(expiresAt), ms(now), id); err != nil {
		return fmt.Errorf("extend session: %w", err)
	}
	return nil
}

// DeleteSession deletes the session with that token, if any.
func (db *DB) DeleteSession(ctx context.Context, token string) error {
	db.observe(ctx, "delete_session")
	if _, err := db.w.ExecContext(ctx, `DELETE FROM session WHERE token = ?`, token); err != nil {
		return fmt.Errorf("delete session: %w", err)
	}
	return nil
}

// DeleteOtherSessions deletes the user's sessions except keepToken.
func (db *DB) DeleteOtherSessions(ctx context.Context, userID, keepToken string) error {
	db.observe(ctx, "delete_other_sessions")
	if _, err := db.w.ExecContext(ctx, `DELETE FROM session WHERE user_id = ? AND token <> ?`, userID, keepToken); err != nil {
		return fmt.Errorf("delete other sessions: %w", err)
	}
	return nil
}
