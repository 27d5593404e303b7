package sqlstore

import (
	"context"
	"fmt"
)

// SetUserVersionForTest lets tests simulate a database from a newer binary.
func (db *DB) SetUserVersionForTest(ctx context.Context, v int) error {
	_, err := db.w.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", v))
	return err
}
