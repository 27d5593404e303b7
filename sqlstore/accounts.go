package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/authsidecar/authsidecar/issuer"
)

// Identity-provider accounts and sign-in flows (issue 21). The tokens an
// account holds arrive sealed and leave sealed: the store never sees a
// provider token in the clear.

// accountColumns are the account table's columns in the order
// scanAccount and insertAccount use.
const accountColumns = `a.id, a.account_id, a.provider_id, a.user_id, a.password, a.access_token, a.refresh_token, a.id_token,
	a.access_token_expires_at, a.refresh_token_expires_at, a.scope, a.created_at, a.updated_at`

func scanAccount(sc interface{ Scan(...any) error }, extra ...any) (issuer.Account, error) {
	var a issuer.Account
	var pw sql.NullString
	var accessExp, refreshExp sql.NullInt64
	var created, updated int64
	dest := append([]any{&a.ID, &a.AccountID, &a.ProviderID, &a.UserID, &pw, &a.AccessToken, &a.RefreshToken, &a.IDToken,
		&accessExp, &refreshExp, &a.Scope, &created, &updated}, extra...)
	if err := sc.Scan(dest...); err != nil {
		return issuer.Account{}, err
	}
	if pw.Valid {
		a.Password = &pw.String
	}
	a.AccessTokenExpiresAt, a.RefreshTokenExpiresAt = fromNullMS(accessExp), fromNullMS(refreshExp)
	a.CreatedAt, a.UpdatedAt = fromMS(created), fromMS(updated)
	return a, nil
}

// nullBytes stores an empty token as NULL, as a missing one.
func nullBytes(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	return b
}

func insertAccount(ctx context.Context, t tx, a issuer.Account) error {
	var pw sql.NullString
	if a.Password != nil {
		pw = sql.NullString{String: *a.Password, Valid: true}
	}
	_, err := t.exec(ctx,
		`INSERT INTO account (id, account_id, provider_id, user_id, password, access_token, refresh_token, id_token,
		 access_token_expires_at, refresh_token_expires_at, scope, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		a.ID, a.AccountID, a.ProviderID, a.UserID, pw, nullBytes(a.AccessToken), nullBytes(a.RefreshToken), nullBytes(a.IDToken),
		nullMS(a.AccessTokenExpiresAt), nullMS(a.RefreshTokenExpiresAt), a.Scope, ms(a.CreatedAt), ms(a.UpdatedAt))
	if t.db.dl.accountTaken(err) {
		return issuer.ErrAccountTaken
	}
	if err != nil {
		return fmt.Errorf("insert account %s: %w", a.ID, err)
	}
	return nil
}

// SaveOAuthState stores a flow; one save in sweepEvery also deletes the
// expired flows, outside the transaction as TakeToken's sweep.
func (db *DB) SaveOAuthState(ctx context.Context, s issuer.OAuthState) error {
	db.observe(ctx, "save_oauth_state")
	if len(s.Sealed) == 0 {
		return errors.New("save oauth state: empty payload")
	}
	if _, err := db.exec(ctx, `INSERT INTO oauth_state (hash, provider_id, payload, expires_at, created_at) VALUES (?, ?, ?, ?, ?)`,
		s.Hash[:], s.ProviderID, s.Sealed, ms(s.ExpiresAt), ms(s.CreatedAt)); err != nil {
		return fmt.Errorf("save oauth state: %w", err)
	}
	if db.states.Add(1)%sweepEvery == 0 {
		db.exec(ctx, `DELETE FROM oauth_state WHERE hash IN (SELECT hash FROM oauth_state WHERE expires_at <= ?`+db.dl.skipLocked+`)`, ms(s.CreatedAt))
	}
	return nil
}

// OAuthState reads a flow without spending it.
func (db *DB) OAuthState(ctx context.Context, hash [32]byte) (issuer.OAuthState, error) {
	db.observe(ctx, "oauth_state")
	s, err := scanOAuthState(db.queryRow(ctx, `SELECT hash, provider_id, payload, expires_at, created_at FROM oauth_state WHERE hash = ?`, hash[:]))
	if errors.Is(err, sql.ErrNoRows) {
		return issuer.OAuthState{}, issuer.ErrNotFound
	}
	if err != nil {
		return issuer.OAuthState{}, fmt.Errorf("oauth state: %w", err)
	}
	return s, nil
}

func scanOAuthState(sc interface{ Scan(...any) error }) (issuer.OAuthState, error) {
	var s issuer.OAuthState
	var hash []byte
	var exp, created int64
	if err := sc.Scan(&hash, &s.ProviderID, &s.Sealed, &exp, &created); err != nil {
		return issuer.OAuthState{}, err
	}
	if len(hash) != len(s.Hash) {
		return issuer.OAuthState{}, fmt.Errorf("oauth state: hash of %d bytes, want %d", len(hash), len(s.Hash))
	}
	copy(s.Hash[:], hash)
	s.ExpiresAt, s.CreatedAt = fromMS(exp), fromMS(created)
	return s, nil
}

// TakeOAuthState spends a flow: of two callbacks racing with one state,
// exactly one deletes the row.
func (db *DB) TakeOAuthState(ctx context.Context, hash [32]byte) error {
	db.observe(ctx, "take_oauth_state")
	res, err := db.exec(ctx, `DELETE FROM oauth_state WHERE hash = ?`, hash[:])
	if err != nil {
		return fmt.Errorf("take oauth state: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return issuer.ErrNotFound
	}
	return nil
}

// AccountByProvider returns the account of a provider identity and its
// user.
func (db *DB) AccountByProvider(ctx context.Context, providerID, accountID string) (issuer.Account, issuer.User, error) {
	db.observe(ctx, "account_by_provider")
	var u issuer.User
	row := db.queryRow(ctx, `SELECT `+accountColumns+`, `+userColumns+` FROM account a JOIN "user" u ON u.id = a.user_id
		 WHERE a.provider_id = ? AND a.account_id = ?`, providerID, accountID)
	var image, banReason sql.NullString
	var created, updated int64
	var banExpires sql.NullInt64
	a, err := scanAccount(row, &u.ID, &u.Name, &u.Email, &u.EmailVerified, &image, &created, &updated, &u.Ban.Banned, &banReason, &banExpires, &u.EmailUnclaimed)
	if errors.Is(err, sql.ErrNoRows) {
		return issuer.Account{}, issuer.User{}, issuer.ErrNotFound
	}
	if err != nil {
		return issuer.Account{}, issuer.User{}, fmt.Errorf("account by provider: %w", err)
	}
	if image.Valid {
		u.Image = &image.String
	}
	u.CreatedAt, u.UpdatedAt = fromMS(created), fromMS(updated)
	u.Ban.Reason, u.Ban.Expires = banReason.String, fromNullMS(banExpires)
	return a, u, nil
}

// CreateSocialUser inserts a user signing up through a provider, its
// account and its first session.
func (db *DB) CreateSocialUser(ctx context.Context, u issuer.User, a issuer.Account, s issuer.Session) error {
	db.observe(ctx, "create_social_user")
	return db.withTx(ctx, func(t tx) error {
		if err := insertUser(ctx, t, u); err != nil {
			return err
		}
		if err := insertAccount(ctx, t, a); err != nil {
			return err
		}
		return insertSession(ctx, t, s)
	})
}

// LinkAccount adds a provider account to an existing user (and a session
// when s has a token). The user's row is locked first, as every
// transaction that touches a user's dependents does (recovery.go).
func (db *DB) LinkAccount(ctx context.Context, a issuer.Account, s issuer.Session) error {
	db.observe(ctx, "link_account")
	return db.withTx(ctx, func(t tx) error {
		if _, err := lockUser(ctx, t, a.UserID); err != nil {
			return err
		}
		if err := insertAccount(ctx, t, a); err != nil {
			return err
		}
		if s.Token == "" {
			return nil
		}
		return insertSession(ctx, t, s)
	})
}

// UpdateAccount writes a sign-in's fresh tokens into the account.
func (db *DB) UpdateAccount(ctx context.Context, a issuer.Account, s issuer.Session, verifyEmail bool) error {
	db.observe(ctx, "update_account")
	return db.withTx(ctx, func(t tx) error {
		if _, err := lockUser(ctx, t, a.UserID); err != nil {
			return err
		}
		res, err := t.exec(ctx, `UPDATE account SET access_token = ?, refresh_token = ?, id_token = ?, access_token_expires_at = ?,
			 refresh_token_expires_at = ?, scope = ?, updated_at = ? WHERE id = ? AND user_id = ?`,
			nullBytes(a.AccessToken), nullBytes(a.RefreshToken), nullBytes(a.IDToken), nullMS(a.AccessTokenExpiresAt),
			nullMS(a.RefreshTokenExpiresAt), a.Scope, ms(a.UpdatedAt), a.ID, a.UserID)
		if err != nil {
			return fmt.Errorf("update account: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return issuer.ErrNotFound
		}
		if verifyEmail {
			if _, err := t.exec(ctx, `UPDATE "user" SET email_verified = ?, updated_at = ? WHERE id = ? AND email_verified = ?`,
				true, ms(a.UpdatedAt), a.UserID, false); err != nil {
				return fmt.Errorf("verify email: %w", err)
			}
		}
		if s.Token == "" {
			return nil
		}
		return insertSession(ctx, t, s)
	})
}

// Accounts returns the user's accounts, oldest first.
func (db *DB) Accounts(ctx context.Context, userID string) ([]issuer.Account, error) {
	db.observe(ctx, "accounts")
	rows, err := db.query(ctx, `SELECT `+accountColumns+` FROM account a WHERE a.user_id = ? ORDER BY a.created_at, a.id`, userID)
	if err != nil {
		return nil, fmt.Errorf("accounts: %w", err)
	}
	defer rows.Close()
	var out []issuer.Account
	for rows.Next() {
		a, err := scanAccount(rows)
		if err != nil {
			return nil, fmt.Errorf("accounts: %w", err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("accounts: %w", err)
	}
	return out, nil
}

// DeleteAccount unlinks one account, never the user's last: the count
// and the delete are one transaction under the user's lock, so two
// unlinks at once cannot leave the user with none.
func (db *DB) DeleteAccount(ctx context.Context, userID, id string) error {
	db.observe(ctx, "delete_account")
	return db.withTx(ctx, func(t tx) error {
		if _, err := lockUser(ctx, t, userID); err != nil {
			return err
		}
		var n, mine int
		if err := t.queryRow(ctx, `SELECT count(*), coalesce(sum(CASE WHEN id = ? THEN 1 ELSE 0 END), 0) FROM account WHERE user_id = ?`, id, userID).Scan(&n, &mine); err != nil {
			return fmt.Errorf("count accounts: %w", err)
		}
		switch {
		case mine == 0:
			return issuer.ErrNotFound
		case n <= 1:
			return issuer.ErrLastAccount
		}
		if _, err := t.exec(ctx, `DELETE FROM account WHERE id = ? AND user_id = ?`, id, userID); err != nil {
			return fmt.Errorf("delete account: %w", err)
		}
		return nil
	})
}
