package sqlstore

import (
	"context"
	"fmt"

	"github.com/authsidecar/authsidecar/issuer"
	"github.com/authsidecar/authsidecar/passhash"
)

// CreateSessionRehashed inserts s and swaps the user's password hash from
// oldHash to newHash in one transaction. The swap is a compare-and-swap
// on the old hash: of two sign-ins racing with the same foreign hash, the
// second finds it replaced, changes nothing and still gets its session.
func (db *DB) CreateSessionRehashed(ctx context.Context, s issuer.Session, oldHash, newHash string) (bool, error) {
	db.observe(ctx, "create_session_rehashed")
	var replaced bool
	err := db.withTx(ctx, func(t tx) error {
		res, err := t.exec(ctx,
			`UPDATE account SET password = ?, updated_at = ? WHERE user_id = ? AND provider_id = 'credential' AND password = ?`,
			newHash, ms(s.CreatedAt), s.UserID, oldHash)
		if err != nil {
			return fmt.Errorf("rehash password: %w", err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return fmt.Errorf("rehash password: %w", err)
		}
		replaced = n == 1
		return insertSession(ctx, t, s)
	})
	if err != nil {
		return false, err
	}
	return replaced, nil
}

// passwordFormat names each credential's hash format in SQL, from its
// prefix or shape, as passhash.Parse recognizes it (the formats' names are
// passhash's; TestConformance's PasswordFormats checks the two agree on
// a hash of each). A value no branch names is "other": passhash may still
// refuse one that a branch names, which sign-in then logs.
var passwordFormat = `CASE
 WHEN substr(password, 1, 4) IN ('$2a$', '$2b$', '$2y$') THEN '` + string(passhash.Bcrypt) + `'
 WHEN substr(password, 1, 10) = '$argon2id$' THEN '` + string(passhash.Argon2id) + `'
 WHEN substr(password, 1, 9) = '$argon2i$' THEN '` + string(passhash.Argon2i) + `'
 WHEN substr(password, 1, 8) = '$scrypt$' THEN '` + string(passhash.ScryptPHC) + `'
 WHEN substr(password, 1, 15) = '$pbkdf2-sha256$' THEN '` + string(passhash.PasslibPBKDF2SHA256) + `'
 WHEN substr(password, 1, 15) = '$pbkdf2-sha512$' THEN '` + string(passhash.PasslibPBKDF2SHA512) + `'
 WHEN substr(password, 1, 3) IN ('$P$', '$H$') THEN '` + string(passhash.PHPass) + `'
 WHEN substr(password, 1, 1) = '$' THEN 'other'
 WHEN substr(password, 1, 14) = 'pbkdf2_sha256$' THEN '` + string(passhash.DjangoPBKDF2SHA256) + `'
 WHEN substr(password, 1, 12) = 'pbkdf2_sha1$' THEN '` + string(passhash.DjangoPBKDF2SHA1) + `'
 WHEN substr(password, 1, 4) = 'md5$' THEN '` + string(passhash.MD5Salted) + `'
 WHEN substr(password, 1, 5) = 'sha1$' THEN '` + string(passhash.SHA1Salted) + `'
 WHEN substr(password, 1, 7) = 'sha256$' THEN '` + string(passhash.SHA256Salted) + `'
 WHEN password LIKE '%:%' THEN '` + string(passhash.Scrypt) + `'
 WHEN password LIKE '%$%' THEN 'other'
 WHEN length(password) = 32 THEN '` + string(passhash.MD5) + `'
 WHEN length(password) = 40 THEN '` + string(passhash.SHA1) + `'
 WHEN length(password) = 64 THEN '` + string(passhash.SHA256) + `'
 WHEN substr(password, 1, 6) = 'AQAAAA' THEN '` + string(passhash.ASPNetIdentityV3) + `'
 WHEN substr(password, 1, 1) = 'A' AND length(password) = 68 THEN '` + string(passhash.ASPNetIdentityV2) + `'
 ELSE 'other' END`

// PasswordFormats counts the credentials by their hash's format: one
// scan of the account table, grouped in the database, for
// authsidecar_password_hashes. Formats no credential has are absent.
func (db *DB) PasswordFormats(ctx context.Context) (map[string]int64, error) {
	db.observe(ctx, "password_formats")
	rows, err := db.query(ctx, `SELECT f, count(*) FROM (SELECT `+passwordFormat+` AS f FROM account
		WHERE provider_id = 'credential' AND password IS NOT NULL) AS formats GROUP BY f`)
	if err != nil {
		return nil, fmt.Errorf("password formats: %w", err)
	}
	defer rows.Close()
	counts := map[string]int64{}
	for rows.Next() {
		var f string
		var n int64
		if err := rows.Scan(&f, &n); err != nil {
			return nil, fmt.Errorf("password formats: %w", err)
		}
		counts[f] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("password formats: %w", err)
	}
	return counts, nil
}
