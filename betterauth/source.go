package betterauth

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// Source is a Better Auth database, open for reading.
type Source struct {
	db       *sql.DB
	postgres bool
	where    string // for messages: no password
}

// Open opens the database from names: "postgres://…" (or
// "postgresql://…") or "sqlite:PATH". A SQLite file must exist, and is
// opened so that no statement can write to it.
func Open(ctx context.Context, from string) (*Source, error) {
	switch {
	case strings.HasPrefix(from, "postgres://"), strings.HasPrefix(from, "postgresql://"):
		return openPostgres(ctx, from)
	case strings.HasPrefix(from, "sqlite:"):
		return openSQLite(ctx, strings.TrimPrefix(from, "sqlite:"))
	}
	return nil, errors.New("want postgres://… or sqlite:PATH")
}

func openPostgres(ctx context.Context, raw string) (*Source, error) {
	cc, err := pgx.ParseConfig(raw)
	if err != nil {
		return nil, redact(fmt.Errorf("bad connection URL: %w", err), raw)
	}
	cc.ConnectTimeout = 5 * time.Second
	s := &Source{db: stdlib.OpenDB(*cc), postgres: true, where: fmt.Sprintf("postgres://%s:%d/%s", cc.Host, cc.Port, cc.Database)}
	if err := s.db.PingContext(ctx); err != nil {
		s.db.Close()
		return nil, redact(fmt.Errorf("connect to %s: %w", s.where, err), raw)
	}
	return s, nil
}

func openSQLite(ctx context.Context, path string) (*Source, error) {
	if path == "" {
		return nil, errors.New("sqlite: no file named: want sqlite:PATH")
	}
	if _, err := os.Stat(path); err != nil {
		return nil, err
	}
	q := url.Values{}
	q.Add("_pragma", "query_only(1)")
	q.Add("_pragma", "busy_timeout(10000)")
	p := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
	db, err := sql.Open("sqlite", "file:"+p+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	s := &Source{db: db, where: path}
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	return s, nil
}

// redact makes sure no message carries the URL's password, whatever the
// driver put in it.
func redact(err error, raw string) error {
	u, perr := url.Parse(raw)
	if perr != nil || u.User == nil {
		return err
	}
	pw, ok := u.User.Password()
	if msg := err.Error(); ok && pw != "" && strings.Contains(msg, pw) {
		return errors.New(strings.ReplaceAll(msg, pw, "xxxxx"))
	}
	return err
}

// String names the database for messages, without a password.
func (s *Source) String() string { return s.where }

// Close closes the database.
func (s *Source) Close() error { return s.db.Close() }

// begin starts the read transaction every table is read in, so that what
// is read is one state of a database that may still be serving.
func (s *Source) begin(ctx context.Context) (*sql.Tx, error) {
	if s.postgres {
		return s.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true, Isolation: sql.LevelRepeatableRead})
	}
	return s.db.BeginTx(ctx, nil)
}

// tablesQuery lists the tables of the schema in use; columnsQuery the
// columns of one (its name bound as the only parameter).
func (s *Source) tablesQuery() string {
	if s.postgres {
		return `SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'`
	}
	return `SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\_%' ESCAPE '\'`
}

func (s *Source) columnsQuery() string {
	if s.postgres {
		return `SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = $1`
	}
	return `SELECT name FROM pragma_table_info(?)`
}
