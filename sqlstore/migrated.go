package sqlstore

import (
	"context"
	"fmt"

	"github.com/authsidecar/authsidecar/issuer"
)

// CreateMigratedUser stores a user a legacy application vouched for at
// its first sign-in (lazy migration): the user with the legacy id, its
// credential account, its roles and, unless s.Token is empty, its first
// session, in one transaction. The unique email and the primary key
// decide a race between two sign-ins for the same address: the second
// gets issuer.ErrEmailTaken or issuer.ErrUserIDTaken and stores nothing.
func (db *DB) CreateMigratedUser(ctx context.Context, u issuer.User, passwordHash string, roles []string, s issuer.Session) error {
	db.observe(ctx, "create_migrated_user")
	return db.withTx(ctx, func(t tx) error {
		if err := insertUser(ctx, t, u); err != nil {
			return err
		}
		if err := insertCredential(ctx, t, u, passwordHash); err != nil {
			return err
		}
		for _, role := range roles {
			_, err := t.exec(ctx,
				`INSERT INTO user_role (user_id, role, created_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`, u.ID, role, ms(u.CreatedAt))
			if err != nil {
				return fmt.Errorf("grant role: %w", err)
			}
		}
		if s.Token == "" {
			return nil
		}
		return insertSession(ctx, t, s)
	})
}
