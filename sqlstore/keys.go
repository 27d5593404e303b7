package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/authsidecar/authsidecar/issuer"
)

const keysQuery = `SELECT id, public_key, private_key, created_at, expires_at, COALESCE(alg, ''), COALESCE(crv, '') FROM jwks ORDER BY created_at DESC, id`

func scanKey(rows *sql.Rows) (issuer.KeyRecord, error) {
	var k issuer.KeyRecord
	var created int64
	var expires sql.NullInt64
	err := rows.Scan(&k.ID, &k.PublicKey, &k.PrivateKey, &created, &expires, &k.Alg, &k.Crv)
	k.CreatedAt, k.ExpiresAt = fromMS(created), fromNullMS(expires)
	return k, err
}

// Keys returns every row of the jwks table.
func (db *DB) Keys(ctx context.Context) ([]issuer.KeyRecord, error) {
	db.observe(ctx, "keys")
	rows, err := db.query(ctx, keysQuery)
	if err != nil {
		return nil, fmt.Errorf("select keys: %w", err)
	}
	defer rows.Close()
	var out []issuer.KeyRecord
	for rows.Next() {
		k, err := scanKey(rows)
		if err != nil {
			return nil, fmt.Errorf("scan key: %w", err)
		}
		out = append(out, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("select keys: %w", err)
	}
	return out, nil
}

func insertKey(ctx context.Context, ex execer, k issuer.KeyRecord) error {
	_, err := ex.exec(ctx,
		`INSERT INTO jwks (id, public_key, private_key, created_at, expires_at, alg, crv) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		k.ID, k.PublicKey, k.PrivateKey, ms(k.CreatedAt), nullMS(k.ExpiresAt), k.Alg, k.Crv)
	if err != nil {
		return fmt.Errorf("insert key %s: %w", k.ID, err)
	}
	return nil
}

// InsertKey stores a new key row.
func (db *DB) InsertKey(ctx context.Context, k issuer.KeyRecord) error {
	db.observe(ctx, "insert_key")
	return insertKey(ctx, db, k)
}

// SetKeyExpiry sets when a key stops signing.
func (db *DB) SetKeyExpiry(ctx context.Context, kid string, at time.Time) error {
	db.observe(ctx, "set_key_expiry")
	if _, err := db.exec(ctx, `UPDATE jwks SET expires_at = ? WHERE id = ?`, ms(at), kid); err != nil {
		return fmt.Errorf("set key expiry: %w", err)
	}
	return nil
}

// LockKeys serializes key creation among every process on the database:
// on PostgreSQL an advisory lock held on a connection of its own; on SQLite
// nothing, because one process owns the file and the issuer already
// serializes its own key creation.
func (db *DB) LockKeys(ctx context.Context) (unlock func(), err error) {
	if db.dl == sqliteDialect {
		return func() {}, nil
	}
	db.observe(ctx, "lock_keys")
	return db.advisoryLock(ctx, lockKeys)
}
