package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/authsidecar/authsidecar/issuer"
)

// Keys returns every row of the jwks table.
func (db *DB) Keys(ctx context.Context) ([]issuer.KeyRecord, error) {
	db.observe(ctx, "keys")
	rows, err := db.r.QueryContext(ctx,
		`SELECT id, public_key, private_key, created_at, expires_at, COALESCE(alg, ''), COALESCE(crv, '') FROM jwks ORDER BY created_at DESC`)
	if err != nil {
		return nil, fmt.Errorf("select keys: %w", err)
	}
	defer rows.Close()
	var out []issuer.KeyRecord
	for rows.Next() {
		var k issuer.KeyRecord
		var created int64
		var expires sql.NullInt64
		if err := rows.Scan(&k.ID, &k.PublicKey, &k.PrivateKey, &created, &expires, &k.Alg, &k.Crv); err != nil {
			return nil, fmt.Errorf("scan key: %w", err)
		}
		k.CreatedAt, k.ExpiresAt = fromMS(created), fromNullMS(expires)
		out = append(out, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("select keys: %w", err)
	}
	return out, nil
}

// InsertKey stores a new key row.
func (db *DB) InsertKey(ctx context.Context, k issuer.KeyRecord) error {
	db.observe(ctx, "insert_key")
	_, err := db.w.ExecContext(ctx,
		`INSERT INTO jwks (id, public_key, private_key, created_at, expires_at, alg, crv) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		k.ID, k.PublicKey, k.PrivateKey, ms(k.CreatedAt), nullMS(k.ExpiresAt), k.Alg, k.Crv)
	if err != nil {
		return fmt.Errorf("insert key: %w", err)
	}
	return nil
}

// SetKeyExpiry sets when a key stops signing.
func (db *DB) SetKeyExpiry(ctx context.Context, kid string, at time.Time) error {
	db.observe(ctx, "set_key_expiry")
	if _, err := db.w.ExecContext(ctx, `UPDATE jwks SET expires_at = ? WHERE id = ?`, ms(at), kid); err != nil {
		return fmt.Errorf("set key expiry: %w", err)
	}
	return nil
}
