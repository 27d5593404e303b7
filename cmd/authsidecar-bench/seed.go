package main

import (
	"context"
	crand "crypto/rand"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/authsidecar/authsidecar/issuer"
	"github.com/authsidecar/authsidecar/sqlstore" // also registers the "sqlite" driver
)

// seedBatch is how many users one transaction inserts.
const seedBatch = 10000

// runSeed is "authsidecar-bench seed -users N -db PATH": it fills an
// empty database with N users directly in SQL, for the cost-growth
// measurement (issue 6, part 4). Every user is user<i>@example.com with
// the benchmark's password; they share one precomputed scrypt hash (in
// Better Auth's format, at Better Auth's cost), so seeding costs one hash,
// not N. The schema comes from sqlstore.OpenSQLite, which runs the migrations.
func runSeed(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	flags := flag.NewFlagSet("seed", flag.ContinueOnError)
	flags.SetOutput(stderr)
	users := flags.Int("users", 0, "users to insert (1..10000000)")
	path := flags.String("db", "", "database file to create or fill; it must hold no users yet")
	if err := flags.Parse(args); err != nil {
		return err
	}
	if flags.NArg() > 0 || *users < 1 || *users > 10_000_000 || *path == "" {
		return fmt.Errorf("%w: seed -users N -db PATH (N in 1..10000000)", errUsage)
	}
	began := time.Now()
	db, err := sqlstore.OpenSQLite(ctx, *path)
	if err != nil {
		return err
	}
	if err := db.Close(); err != nil {
		return err
	}
	hash, err := issuer.HashPassword(ctx, benchPassword, issuer.ScryptParams{})
	if err != nil {
		return err
	}
	// synchronous=OFF: a bulk load that can be redone, not data to keep
	// safe from a power cut. A 256 MiB page cache keeps the indexes, which
	// random ids fill in random order, off the disk (1M users: 59 s instead of 95 s).
	raw, err := sql.Open("sqlite", "file:"+*path+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(OFF)&_pragma=cache_size(-262144)&_txlock=immediate")
	if err != nil {
		return err
	}
	defer raw.Close()
	raw.SetMaxOpenConns(1)
	var have int
	if err := raw.QueryRowContext(ctx, `SELECT count(*) FROM "user"`).Scan(&have); err != nil {
		return fmt.Errorf("count users: %w", err)
	}
	if have > 0 {
		return fmt.Errorf("%s already holds %d users: seed wants an empty database", *path, have)
	}
	var seed [32]byte
	crand.Read(seed[:])
	rng := rand.New(rand.NewChaCha8(seed))
	now := time.Now().UnixMilli()
	for start := 0; start < *users; start += seedBatch {
		if err := insertUsers(ctx, raw, rng, start, min(start+seedBatch, *users), hash, now); err != nil {
			return err
		}
		if done := min(start+seedBatch, *users); done%100_000 == 0 || done == *users {
			fmt.Fprintf(stderr, "seed: %d users, %.1fs\n", done, time.Since(began).Seconds())
		}
	}
	if _, err := raw.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	if _, err := dbSecret(*path); err != nil {
		return err
	}
	elapsed := time.Since(began)
	size := fileSize(*path) + fileSize(*path+"-wal")
	fmt.Fprintf(stdout, "seeded %d users into %s in %.1fs (%.0f users/s); the file is %.1f MiB (%.0f bytes/user)\n",
		*users, *path, elapsed.Seconds(), float64(*users)/elapsed.Seconds(), float64(size)/(1<<20), float64(size)/float64(*users))
	return nil
}

// insertUsers inserts user<i> for i in [from, to) in one transaction: the
// user row and its credential account, as sign-up writes them. (Multi-row
// INSERTs were no faster: the time goes to the random-order indexes.)
func insertUsers(ctx context.Context, db *sql.DB, rng *rand.Rand, from, to int, hash string, now int64) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	insUser, err := tx.PrepareContext(ctx, `INSERT INTO "user" (id, name, email, email_verified, image, created_at, updated_at) VALUES (?, ?, ?, 0, NULL, ?, ?)`)
	if err != nil {
		return err
	}
	insAccount, err := tx.PrepareContext(ctx, `INSERT INTO account (id, account_id, provider_id, user_id, password, created_at, updated_at) VALUES (?, ?, 'credential', ?, ?, ?, ?)`)
	if err != nil {
		return err
	}
	for i := from; i < to; i++ {
		id := randomID(rng)
		if _, err := insUser.ExecContext(ctx, id, "User "+strconv.Itoa(i), email(i), now, now); err != nil {
			return fmt.Errorf("insert user %d: %w", i, err)
		}
		if _, err := insAccount.ExecContext(ctx, "cred_"+id, id, id, hash, now, now); err != nil {
			return fmt.Errorf("insert account %d: %w", i, err)
		}
	}
	return tx.Commit()
}

const idAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

// randomID has Better Auth's id shape (32 of [A-Za-z0-9]); a seeded
// ChaCha8 is plenty for benchmark rows.
func randomID(rng *rand.Rand) string {
	var b [32]byte
	for i := range b {
		b[i] = idAlphabet[rng.IntN(len(idAlphabet))]
	}
	return string(b[:])
}

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// countUsers reports how many users the database at path holds (0 when it
// does not exist yet: the sidecar will create it).
func countUsers(ctx context.Context, path string) (int, error) {
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro&_pragma=busy_timeout(10000)")
	if err != nil {
		return 0, err
	}
	defer db.Close()
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM "user"`).Scan(&n); err != nil {
		if strings.Contains(err.Error(), "no such table") {
			return 0, nil
		}
		return 0, fmt.Errorf("count users in %s: %w", path, err)
	}
	return n, nil
}

// dbSecret is the AUTH_SECRET kept beside a database the benchmark reuses
// (PATH.bench-secret, 0600), created on first use: signing keys are sealed
// with it, so a new secret on every run would add a key every run.
func dbSecret(path string) (string, error) {
	sp := path + ".bench-secret"
	if b, err := os.ReadFile(sp); err == nil {
		if s := strings.TrimSpace(string(b)); len(s) >= 32 {
			return s, nil
		}
		return "", fmt.Errorf("%s: too short, delete it", sp)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	s := newSecret()
	if err := os.WriteFile(sp, []byte(s+"\n"), 0o600); err != nil {
		return "", err
	}
	return s, nil
}
