package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// OpenSQLite opens (creating with mode 0600 if needed) and migrates the
// SQLite database at path.
func OpenSQLite(ctx context.Context, path string) (*DB, error) {
	// Create the file ourselves so it is never world-readable: it holds
	// password hashes and encrypted keys.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	f.Close()

	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "foreign_keys(1)")
	// A deleted or NULLed value is overwritten in its page, not just
	// unlinked: an outbox payload (a sealed link) must be gone from the
	// file once acknowledged. "fast" zeroes only what costs no extra I/O
	// (freelist pages may keep traces; payloads are far smaller than a
	// page, so they never sit on overflow pages). Until a checkpoint
	// overwrites it, the WAL may still hold the page as it was.
	q.Add("_pragma", "secure_delete(fast)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_time_format", "sqlite")
	w, err := sql.Open("sqlite", sqliteURI(path, q)+"&_txlock=immediate")
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxIdleTime(0)
	w.SetConnMaxLifetime(0)
	r, err := sql.Open("sqlite", sqliteURI(path, q))
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("open database: %w", err)
	}
	n := max(4, runtime.GOMAXPROCS(0)*2)
	r.SetMaxOpenConns(n)
	r.SetMaxIdleConns(n)
	db := &DB{w: w, r: r, dl: sqliteDialect, where: path}
	if err := db.migrate(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// PostgresOptions configures OpenPostgres.
type PostgresOptions struct {
	// URL is a postgres:// URL or key=value connection string. Required.
	// It is never printed: errors name the host and database only.
	URL string
	// MaxConns bounds the pool. Zero: 10. Below 2 it is 2: an advisory
	// lock (migrations, LockKeys) holds a connection while the work done
	// under it queries through the pool, so a pool of one would wait for
	// itself forever.
	MaxConns int
	// ConnectTimeout bounds one connection attempt, so a dead server
	// answers requests with an error instead of holding them. Zero: 3s.
	ConnectTimeout time.Duration
}

// OpenPostgres connects to PostgreSQL, checks the server answers, and
// migrates the schema under an advisory lock (replicas starting together
// take turns; each applies only what is still missing).
func OpenPostgres(ctx context.Context, o PostgresOptions) (*DB, error) {
	if o.MaxConns == 0 {
		o.MaxConns = 10
	}
	o.MaxConns = max(o.MaxConns, 2)
	cc, where, err := postgresConfig(o)
	if err != nil {
		return nil, err
	}
	// A connection idle for a moment is pinged before reuse (pgx's default
	// is a second): after a database restart, the pool's old connections
	// are found dead by the ping, not by a request that then fails.
	p := stdlib.OpenDB(*cc, stdlib.OptionShouldPing(func(_ context.Context, sp stdlib.ShouldPingParams) bool {
		return sp.IdleDuration > 100*time.Millisecond
	}))
	p.SetMaxOpenConns(o.MaxConns)
	p.SetMaxIdleConns(o.MaxConns)
	// Connections are recycled, so after a failover or restart the pool
	// holds no connection to a server that is gone for long.
	p.SetConnMaxIdleTime(5 * time.Minute)
	p.SetConnMaxLifetime(30 * time.Minute)
	db := &DB{w: p, r: p, dl: postgresDialect, where: where}
	if err := p.PingContext(ctx); err != nil {
		p.Close()
		return nil, fmt.Errorf("connect to %s: %w", where, redactErr(err, o.URL))
	}
	if err := db.migrate(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("%s: %w", where, redactErr(err, o.URL))
	}
	return db, nil
}

// postgresConfig parses o.URL, applies o.ConnectTimeout, and names the
// database for messages without the password.
func postgresConfig(o PostgresOptions) (cc *pgx.ConnConfig, where string, err error) {
	if o.ConnectTimeout == 0 {
		o.ConnectTimeout = 3 * time.Second
	}
	cc, err = pgx.ParseConfig(o.URL)
	if err != nil {
		// pgx's parse errors quote the string with the password masked;
		// ours adds nothing of the URL.
		return nil, "", fmt.Errorf("postgres: bad connection URL: %w", redactErr(err, o.URL))
	}
	cc.ConnectTimeout = o.ConnectTimeout
	if cc.RuntimeParams == nil {
		cc.RuntimeParams = map[string]string{}
	}
	return cc, fmt.Sprintf("postgres://%s:%d/%s", cc.Host, cc.Port, cc.Database), nil
}

// redactErr makes sure no error text carries the connection password,
// whatever a driver put in it: pgx masks it in its own messages, and this
// is the second lock on that door.
func redactErr(err error, rawURL string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	for _, pw := range passwordsIn(rawURL) {
		if len(pw) > 0 && strings.Contains(msg, pw) {
			return errors.New(strings.ReplaceAll(msg, pw, "xxxxx"))
		}
	}
	return err
}

// passwordsIn returns the password of a URL (raw and unescaped) or of a
// key=value connection string.
func passwordsIn(raw string) []string {
	var out []string
	if u, err := url.Parse(raw); err == nil && u.User != nil {
		if pw, ok := u.User.Password(); ok {
			out = append(out, pw, url.QueryEscape(pw), url.PathEscape(pw))
		}
	}
	for _, f := range strings.Fields(raw) {
		if v, ok := strings.CutPrefix(f, "password="); ok {
			out = append(out, strings.Trim(v, "'"))
		}
	}
	return out
}
