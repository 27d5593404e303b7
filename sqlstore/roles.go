package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

// HasAnyRole reports, in one query, whether the user holds any of roles.
func (db *DB) HasAnyRole(ctx context.Context, userID string, roles []string) (bool, error) {
	db.observe(ctx, "user_role")
	if len(roles) == 0 {
		return false, nil
	}
	args := make([]any, 0, len(roles)+1)
	args = append(args, userID)
	for _, r := range roles {
		args = append(args, r)
	}
	q := `SELECT 1 FROM user_role WHERE user_id = ? AND role IN (?` + strings.Repeat(", ?", len(roles)-1) + `) LIMIT 1`
	var one int
	err := db.queryRow(ctx, q, args...).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("role lookup: %w", err)
	}
	return true, nil
}

// GrantRole gives a user a role; granting one already held is no error.
func (db *DB) GrantRole(ctx context.Context, userID, role string) error {
	db.observe(ctx, "grant_role")
	_, err := db.exec(ctx,
		`INSERT INTO user_role (user_id, role, created_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`, userID, role, ms(time.Now()))
	if err != nil {
		return fmt.Errorf("grant role: %w", err)
	}
	return nil
}
