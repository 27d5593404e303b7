package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/authsidecar/authsidecar/issuer"
	"github.com/authsidecar/authsidecar/mail"
	"github.com/authsidecar/authsidecar/revocation"
)

// ErrNotEmpty: Import refuses a database that already holds rows; a copy
// merged into live data could not be told apart from it afterwards.
var ErrNotEmpty = errors.New("target database is not empty")

// Export reads every user, account (provider tokens sealed as stored),
// session, key, role, recovery token, outbox row (pending ones with their
// sealed payload, leases left out), revocation and sign-in flow in one
// read transaction, so the snapshot is consistent while the source
// serves.
func (db *DB) Export(ctx context.Context) (issuer.Snapshot, error) {
	db.observe(ctx, "export")
	var snap issuer.Snapshot
	t, err := db.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true, Isolation: db.dl.snapshotIsolation})
	if err != nil {
		return snap, fmt.Errorf("export: begin: %w", err)
	}
	defer t.Rollback()
	rt := tx{t, db}
	steps := []struct {
		name string
		q    string
		scan func(*sql.Rows) error
	}{
		{"user", `SELECT ` + userColumns + ` FROM "user" u ORDER BY u.created_at, u.id`, func(rows *sql.Rows) error {
			u, err := scanUser(rows)
			snap.Users = append(snap.Users, u)
			return err
		}},
		{"account", `SELECT ` + accountColumns + ` FROM account a ORDER BY a.id`, func(rows *sql.Rows) error {
			// Provider tokens move sealed: they open with the same
			// AUTH_SECRET on the target, as the signing keys do.
			a, err := scanAccount(rows)
			snap.Accounts = append(snap.Accounts, a)
			return err
		}},
		{"session", `SELECT ` + sessionColumns + ` FROM session s ORDER BY s.id`, func(rows *sql.Rows) error {
			s, err := scanSession(rows)
			snap.Sessions = append(snap.Sessions, s)
			return err
		}},
		{"jwks", keysQuery, func(rows *sql.Rows) error {
			k, err := scanKey(rows)
			snap.Keys = append(snap.Keys, k)
			return err
		}},
		{"user_role", `SELECT r.user_id, u.email, r.role, r.created_at FROM user_role r JOIN "user" u ON u.id = r.user_id ORDER BY r.user_id, r.role`, func(rows *sql.Rows) error {
			var g issuer.RoleGrant
			var created int64
			err := rows.Scan(&g.UserID, &g.Email, &g.Role, &created)
			g.CreatedAt = fromMS(created)
			snap.Roles = append(snap.Roles, g)
			return err
		}},
		{"recovery_token", `SELECT hash, kind, user_id, email, expires_at, created_at FROM recovery_token ORDER BY hash`, func(rows *sql.Rows) error {
			var r issuer.RecoveryToken
			var hash []byte
			var kind string
			var exp, created int64
			if err := rows.Scan(&hash, &kind, &r.UserID, &r.Email, &exp, &created); err != nil {
				return err
			}
			// The schema's CHECK holds it to 32 bytes; a copy must not
			// truncate or pad what it cannot read.
			if len(hash) != len(r.Hash) {
				return fmt.Errorf("token of user %s: hash of %d bytes, want %d", r.UserID, len(hash), len(r.Hash))
			}
			copy(r.Hash[:], hash)
			r.Kind, r.ExpiresAt, r.CreatedAt = mail.Kind(kind), fromMS(exp), fromMS(created)
			snap.RecoveryTokens = append(snap.RecoveryTokens, r)
			return nil
		}},
		{"outbox", `SELECT ` + queuedColumns + ` FROM outbox ORDER BY created_at, id`, func(rows *sql.Rows) error {
			q, err := scanQueued(rows, true)
			snap.Outbox = append(snap.Outbox, q)
			return err
		}},
		{"revocation", `SELECT id, kind, subject, at FROM revocation ORDER BY id`, func(rows *sql.Rows) error {
			var r revocation.Record
			var kind string
			var at int64
			if err := rows.Scan(&r.ID, &kind, &r.Subject, &at); err != nil {
				return err
			}
			k, err := revocation.ParseKind(kind)
			r.Kind, r.At = k, fromMS(at)
			snap.Revocations = append(snap.Revocations, r)
			return err
		}},
		{"oauth_state", `SELECT hash, provider_id, payload, expires_at, created_at FROM oauth_state ORDER BY hash`, func(rows *sql.Rows) error {
			st, err := scanOAuthState(rows)
			snap.OAuthStates = append(snap.OAuthStates, st)
			return err
		}},
	}
	for _, st := range steps {
		rows, err := rt.query(ctx, st.q)
		if err != nil {
			return issuer.Snapshot{}, fmt.Errorf("export %s: %w", st.name, err)
		}
		for rows.Next() {
			if err := st.scan(rows); err != nil {
				rows.Close()
				return issuer.Snapshot{}, fmt.Errorf("export %s: %w", st.name, err)
			}
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return issuer.Snapshot{}, fmt.Errorf("export %s: %w", st.name, err)
		}
	}
	return snap, nil
}

// CheckEmpty returns nil when the database holds no user, session, key,
// role, recovery token or outbox row, and an ErrNotEmpty naming a table
// that holds some otherwise: what Import would refuse, asked beforehand
// (a dry run).
func (db *DB) CheckEmpty(ctx context.Context) error {
	return checkEmpty(ctx, func(ctx context.Context, q string, args ...any) *sql.Row {
		return db.r.QueryRowContext(ctx, db.q(q), args...)
	})
}

func checkEmpty(ctx context.Context, queryRow func(context.Context, string, ...any) *sql.Row) error {
	for _, table := range tables {
		var n int
		if err := queryRow(ctx, `SELECT count(*) FROM "`+table+`"`).Scan(&n); err != nil {
			return fmt.Errorf("count %s: %w", table, err)
		}
		if n > 0 {
			return fmt.Errorf("%w: table %s has %d rows", ErrNotEmpty, table, n)
		}
	}
	return nil
}

// Import writes snap into this database in one transaction: all of it or,
// on any error, none of it. It refuses (ErrNotEmpty) a database that
// already holds a user, session, key, role, recovery token or outbox row.
// Outbox rows arrive without a lease: the target's workers claim the
// pending ones afresh.
func (db *DB) Import(ctx context.Context, snap issuer.Snapshot) error {
	db.observe(ctx, "import")
	return db.withTx(ctx, func(t tx) error {
		if err := checkEmpty(ctx, t.queryRow); err != nil {
			return err
		}
		for _, u := range snap.Users {
			if err := insertUser(ctx, t, u); err != nil {
				return fmt.Errorf("import: %w", err)
			}
		}
		for _, a := range snap.Accounts {
			if err := insertAccount(ctx, t, a); err != nil {
				return fmt.Errorf("import: %w", err)
			}
		}
		for _, s := range snap.Sessions {
			if err := insertSession(ctx, t, s); err != nil {
				return fmt.Errorf("import: %w", err)
			}
		}
		for _, k := range snap.Keys {
			if err := insertKey(ctx, t, k); err != nil {
				return fmt.Errorf("import: %w", err)
			}
		}
		for _, g := range snap.Roles {
			if _, err := t.exec(ctx, `INSERT INTO user_role (user_id, role, created_at) VALUES (?, ?, ?)`, g.UserID, g.Role, ms(g.CreatedAt)); err != nil {
				return fmt.Errorf("import: insert role %s of %s: %w", g.Role, g.UserID, err)
			}
		}
		for _, r := range snap.RecoveryTokens {
			if err := insertRecoveryToken(ctx, t, r); err != nil {
				return fmt.Errorf("import: token of user %s: %w", r.UserID, err)
			}
		}
		for _, q := range snap.Outbox {
			if err := insertOutbox(ctx, t, q); err != nil {
				return fmt.Errorf("import: %w", err)
			}
		}
		for _, r := range snap.Revocations {
			if _, err := t.exec(ctx, `INSERT INTO revocation (id, kind, subject, at) VALUES (?, ?, ?, ?)`, r.ID, r.Kind.String(), r.Subject, ms(r.At)); err != nil {
				return fmt.Errorf("import: insert revocation %d: %w", r.ID, err)
			}
		}
		if len(snap.Revocations) > 0 && t.db.dl.resetRevocationIDs != "" {
			// Explicit ids leave the sequence behind them.
			if _, err := t.exec(ctx, t.db.dl.resetRevocationIDs); err != nil {
				return fmt.Errorf("import: revocation ids: %w", err)
			}
		}
		for _, st := range snap.OAuthStates {
			if _, err := t.exec(ctx, `INSERT INTO oauth_state (hash, provider_id, payload, expires_at, created_at) VALUES (?, ?, ?, ?, ?)`,
				st.Hash[:], st.ProviderID, st.Sealed, ms(st.ExpiresAt), ms(st.CreatedAt)); err != nil {
				return fmt.Errorf("import: insert oauth state: %w", err)
			}
		}
		return nil
	})
}
