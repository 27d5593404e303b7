package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/authsidecar/authsidecar/issuer"
	"github.com/authsidecar/authsidecar/revocation"
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

// Sessions returns the user's sessions that expire after now, oldest
// first.
func (db *DB) Sessions(ctx context.Context, userID string, now time.Time) ([]issuer.Session, error) {
	db.observe(ctx, "list_sessions")
	rows, err := db.query(ctx, `SELECT `+sessionColumns+` FROM session s WHERE s.user_id = ? AND s.expires_at > ? ORDER BY s.created_at, s.id`, userID, ms(now))
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	defer rows.Close()
	out := []issuer.Session{}
	for rows.Next() {
		s, err := scanSession(rows)
		if err != nil {
			return nil, fmt.Errorf("list sessions: %w", err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	return out, nil
}

// EndSession deletes the session with token (of userID, when not empty)
// and, when revoke, revokes the JWTs minted from it, in one transaction.
func (db *DB) EndSession(ctx context.Context, token, userID string, revoke bool, now time.Time) (bool, error) {
	db.observe(ctx, "end_session")
	ended := false
	err := db.revokeTx(ctx, func(t tx, revs *[]revocation.Record) error {
		q, args := `DELETE FROM session WHERE token = ?`, []any{token}
		if userID != "" {
			q, args = q+` AND user_id = ?`, append(args, userID)
		}
		var id string
		err := t.queryRow(ctx, q+` RETURNING id`, args...).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("end session: %w", err)
		}
		ended = true
		if revoke {
			*revs = append(*revs, sessionRevocation(id, now))
		}
		return nil
	})
	return ended && err == nil, err
}

// EndSessions deletes the user's sessions but keepToken's and revokes, in
// the same transaction, every JWT of the user up to now (cutoff) or those
// of each session deleted.
func (db *DB) EndSessions(ctx context.Context, userID, keepToken string, cutoff bool, now time.Time) (int, error) {
	db.observe(ctx, "end_sessions")
	n := 0
	err := db.revokeTx(ctx, func(t tx, revs *[]revocation.Record) error {
		if cutoff {
			ended, err := endUser(ctx, t, revs, userID, keepToken, now)
			n = ended
			return err
		}
		ids, err := deleteSessions(ctx, t, userID, keepToken)
		if err != nil {
			return err
		}
		n = len(ids)
		for _, id := range ids {
			*revs = append(*revs, sessionRevocation(id, now))
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// endUser deletes the user's sessions but keepToken's and revokes every
// JWT of the user issued up to now (a user cutoff) and, whatever their
// issue time, every JWT minted from a session it deleted. The second
// covers a get-session that read one of those sessions just before this
// transaction committed and signs after the cutoff's instant: its JWT
// names a session that no longer exists, and is refused. It returns how
// many sessions it ended.
func endUser(ctx context.Context, t tx, revs *[]revocation.Record, userID, keepToken string, now time.Time) (int, error) {
	ids, err := deleteSessions(ctx, t, userID, keepToken)
	if err != nil {
		return 0, err
	}
	for _, id := range ids {
		*revs = append(*revs, sessionRevocation(id, now))
	}
	*revs = append(*revs, userRevocation(userID, now))
	return len(ids), nil
}

// deleteSessions deletes the user's sessions but keepToken's (every one
// when it is empty: tokens never are) and returns their ids.
func deleteSessions(ctx context.Context, t tx, userID, keepToken string) ([]string, error) {
	ids, err := queryStrings(ctx, t, `DELETE FROM session WHERE user_id = ? AND token <> ? RETURNING id`, userID, keepToken)
	if err != nil {
		return nil, fmt.Errorf("delete sessions: %w", err)
	}
	return ids, nil
}

// queryStrings runs q in t and returns its rows' one text column.
func queryStrings(ctx context.Context, t tx, q string, args ...any) ([]string, error) {
	rows, err := t.query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}
