package sqlstore_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/authsidecar/authsidecar/internal/pgtest"
	"github.com/authsidecar/authsidecar/issuer"
	"github.com/authsidecar/authsidecar/sqlstore"
)

// PostgreSQL twins of the SQLite-only tests in sqlite_test.go, and what
// only a server can do wrong: refuse a password, be down, restart.

func openPostgres(t *testing.T, o sqlstore.PostgresOptions) *sqlstore.DB {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := sqlstore.OpenPostgres(ctx, o)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func TestPostgresRefusesNewerSchema(t *testing.T) {
	u := pgtest.URL(t)
	db := openPostgres(t, sqlstore.PostgresOptions{URL: u})
	db.Close()
	raw, err := sql.Open("pgx", u)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if _, err := raw.Exec(`INSERT INTO schema_migrations (version, name) VALUES (99, '0099_future.sql')`); err != nil {
		t.Fatal(err)
	}
	_, err = sqlstore.OpenPostgres(context.Background(), sqlstore.PostgresOptions{URL: u})
	if err == nil || !strings.Contains(err.Error(), "newer than this binary") {
		t.Fatalf("got %v, want a refusal to run on a newer schema", err)
	}
	if pw := password(t, u); strings.Contains(err.Error(), pw) {
		t.Errorf("error %q holds the password", err)
	}
}

func TestPostgresBackupRefused(t *testing.T) {
	db := openPostgres(t, sqlstore.PostgresOptions{URL: pgtest.URL(t)})
	path := filepath.Join(t.TempDir(), "backup.db")
	if err := db.Backup(context.Background(), path); err == nil || !strings.Contains(err.Error(), "pg_dump") {
		t.Fatalf("got %v, want an error pointing at pg_dump", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused backup left %s behind (%v)", path, err)
	}
}

func password(t *testing.T, rawURL string) string {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	pw, ok := u.User.Password()
	if !ok || pw == "" {
		t.Fatalf("pgtest URL has no password")
	}
	return pw
}

// TestPostgresOpenFailsWithoutPassword: every way of failing to connect
// fails within seconds, names where it tried, and never prints the
// password, right or wrong.
func TestPostgresOpenFailsWithoutPassword(t *testing.T) {
	good, err := url.Parse(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	realPW, _ := good.User.Password()
	secret := make([]byte, 8)
	rand.Read(secret)
	wrongPW := "wrong-" + hex.EncodeToString(secret)
	user := good.User.Username()
	db := strings.TrimPrefix(good.Path, "/")

	with := func(f func(u *url.URL)) string {
		u := *good
		f(&u)
		return u.String()
	}
	closedPort := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ln.Close()
		return ln.Addr().String()
	}()
	// A server that accepts and never answers: only the connect timeout
	// ends the wait.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { silent.Close() })
	go func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()

	tests := []struct {
		name, url string
		wantIn    string // the error names this
	}{
		{"wrong password", with(func(u *url.URL) { u.User = url.UserPassword(user, wrongPW) }), "127.0.0.1"},
		{"wrong password, special characters", with(func(u *url.URL) { u.User = url.UserPassword(user, wrongPW+"@:/?#%") }), "127.0.0.1"},
		{"unknown database", with(func(u *url.URL) { u.Path = "/no_such_db" }), "no_such_db"},
		{"closed port", with(func(u *url.URL) { u.Host = closedPort }), closedPort},
		{"silent server", with(func(u *url.URL) { u.Host = silent.Addr().String() }), silent.Addr().String()},
		{"key=value, wrong password", "host=127.0.0.1 port=" + good.Port() + " user=" + user + " password=" + wrongPW + " dbname=" + db + " sslmode=disable", "127.0.0.1"},
		{"key=value, quoted password", "host=127.0.0.1 port=" + good.Port() + " user=" + user + " password='" + wrongPW + "' dbname=" + db + " sslmode=disable", "127.0.0.1"},
		{"unparsable URL", "postgres://" + user + ":" + wrongPW + "@127.0.0.1:notaport/" + db, "bad connection URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			db, err := sqlstore.OpenPostgres(context.Background(), sqlstore.PostgresOptions{URL: tt.url})
			elapsed := time.Since(start)
			if err == nil {
				db.Close()
				t.Fatal("got nil, want an error")
			}
			msg := err.Error()
			for _, pw := range []string{realPW, wrongPW, url.QueryEscape(wrongPW), hex.EncodeToString(secret)} {
				if strings.Contains(msg, pw) {
					t.Errorf("error %q holds the password %q", msg, pw)
				}
			}
			if !strings.Contains(msg, tt.wantIn) {
				t.Errorf("error %q does not name %q", msg, tt.wantIn)
			}
			// The default connect timeout is 3s.
			if elapsed > 6*time.Second {
				t.Errorf("failed after %v, want within a few seconds", elapsed)
			}
		})
	}

	// A good URL's DB names the server and database, not the password.
	ok := openPostgres(t, sqlstore.PostgresOptions{URL: good.String()})
	if want := "postgres://127.0.0.1:" + good.Port() + "/" + db; ok.String() != want || strings.Contains(ok.String(), realPW) {
		t.Errorf("String: got %q, want %q", ok.String(), want)
	}
}

// TestPostgresOneConnection: a pool of one (database.max_conns: 1 is
// valid config) still migrates and creates a key: the advisory lock's
// connection and the work done under it must not wait for each other.
func TestPostgresOneConnection(t *testing.T) {
	u := pgtest.URL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	db, err := sqlstore.OpenPostgres(ctx, sqlstore.PostgresOptions{URL: u, MaxConns: 1})
	if err != nil {
		t.Fatalf("open with MaxConns 1: %v", err)
	}
	defer db.Close()
	// What the issuer does on first start: lock, read, insert, unlock.
	unlock, err := db.LockKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Keys(ctx); err != nil {
		t.Fatalf("Keys under the lock: %v", err)
	}
	if err := db.InsertKey(ctx, key("k1", t0, time.Time{})); err != nil {
		t.Fatalf("InsertKey under the lock: %v", err)
	}
	unlock()
	if ks, err := db.Keys(ctx); err != nil || len(ks) != 1 {
		t.Errorf("Keys: got %d %v, want 1", len(ks), err)
	}
}

// TestPostgresReconnectsAfterRestart: while the server is down requests
// fail fast with an error; when it is back the same DB serves again
// without being reopened.
func TestPostgresReconnectsAfterRestart(t *testing.T) {
	c := pgtest.Start(t)
	db := openPostgres(t, sqlstore.PostgresOptions{URL: c.URL(), ConnectTimeout: time.Second})
	ctx := context.Background()
	u, s := newUser("u1", "ann@example.com", t0)
	if err := db.CreateUser(ctx, u, "h", s); err != nil {
		t.Fatal(err)
	}
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, _, err := db.SessionByToken(ctx, s.Token); err == nil || errors.Is(err, issuer.ErrNotFound) {
		t.Errorf("server down: got %v, want a database error", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("server down: failed after %v, want within the connect timeout", d)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	// A pooled connection the server closed, reused within 100 ms of its
	// last use, is not pinged first (OpenPostgres pings after 100 ms idle,
	// pgx's default is 1s): its next request fails once and the connection
	// goes. So a request may fail at the restart; the DB must serve again
	// soon, with no reopening.
	var failures []error
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, _, err := db.SessionByToken(ctx, s.Token)
		if err == nil {
			break
		}
		failures = append(failures, err)
		if time.Now().After(deadline) {
			t.Fatalf("server back: still failing after 10s: %v", failures)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(failures) > 0 {
		t.Logf("server back: %d request(s) failed before the pool recovered: %v", len(failures), failures)
	}
	if err := db.Ping(ctx); err != nil {
		t.Errorf("server back: ping: %v", err)
	}
}

// TestRevocationHammerCanFail is the hammer without the lock that orders
// revocation ids: PostgreSQL then commits them out of order, and the
// poller passes over some. It shows the hammer can catch what the lock
// prevents.
func TestRevocationHammerCanFail(t *testing.T) {
	url := pgtest.URL(t)
	e := env{db: database{open: func(ctx context.Context) (*sqlstore.DB, error) {
		return sqlstore.OpenPostgres(ctx, sqlstore.PostgresOptions{URL: url})
	}}}
	db := e.db.mustOpen(t)
	restore := sqlstore.SlowRevocationCommitsForTest(jitter, true)
	defer restore()
	written, read := hammer(t, db, e)
	missed := 0
	for s := range written {
		if read[s] == 0 {
			missed++
		}
	}
	if missed == 0 {
		t.Errorf("without the lock, a poller read all %d revocations: the hammer cannot tell the lock's work", len(written))
	}
	t.Logf("without the lock the poller missed %d of %d revocations", missed, len(written))
}
