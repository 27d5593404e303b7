package main

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/authsidecar/authsidecar/internal/pgtest"
	"github.com/authsidecar/authsidecar/sqlstore"
)

// fsSnapshot describes every entry under a directory, the directory
// itself included: name, mode, size, modification time and a hash of the
// contents. A file created and removed again still changes its
// directory's mtime, so a transient -journal, -wal or -shm shows too.
func fsSnapshot(t *testing.T, root string) string {
	t.Helper()
	var lines []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := os.Lstat(path)
		if err != nil {
			return err
		}
		sum := "-"
		if info.Mode().IsRegular() {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			h := sha256.Sum256(b)
			sum = hex.EncodeToString(h[:8])
		}
		rel, _ := filepath.Rel(root, path)
		lines = append(lines, fmt.Sprintf("%s %v %d %d %s", rel, info.Mode(), info.Size(), info.ModTime().UnixNano(), sum))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// runCheck runs "check" in-process, as main does, with env as the
// environment.
func runCheck(t *testing.T, cfgPath string, env map[string]string) (string, error) {
	t.Helper()
	var out, errOut strings.Builder
	err := run(context.Background(), []string{"check", "-config", cfgPath}, func(k string) string { return env[k] }, strings.NewReader(""), &out, &errOut)
	if errOut.Len() > 0 {
		t.Errorf("check wrote to stderr: %q", errOut.String())
	}
	return out.String(), err
}

// sqliteExec runs statements on a SQLite file through a plain handle, as
// an old binary or a newer one would have left it.
func sqliteExec(t *testing.T, path string, stmts ...string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, s := range stmts {
		if _, err := db.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// newSQLite makes the database serve would have made, with one signing
// key (keys rotate), and closes it: at rest, as between two runs of serve.
func newSQLite(t *testing.T, cfgPath, dbPath string) {
	t.Helper()
	db, err := sqlstore.OpenSQLite(context.Background(), dbPath)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	mustCLI(t, e2eSecret, "", argv(cfgPath, "keys rotate")...)
	for _, suffix := range []string{"-wal", "-shm", "-journal"} {
		if _, err := os.Stat(dbPath + suffix); err == nil {
			t.Fatalf("%s%s left behind: the database is not at rest", dbPath, suffix)
		}
	}
}

// TestCheckReadOnly: check reports everything in one run and leaves the
// file system exactly as it found it, whatever state the database is in.
func TestCheckReadOnly(t *testing.T) {
	withSecret := map[string]string{"AUTH_SECRET": e2eSecret}
	tests := []struct {
		name string
		// dbRel is the database path under the test's directory.
		dbRel string
		// cfg is the config file's body after listen and metrics; %s is
		// the database path.
		cfg string
		// prepare makes the database's state.
		prepare func(t *testing.T, cfgPath, dbPath string)
		env     map[string]string
		// want are lines (or parts of them) the output must hold; wantErr
		// is whether check fails.
		want    []string
		wantErr bool
	}{
		{
			name: "missing file", dbRel: "auth.db", env: withSecret,
			want: []string{"ok    database ", "auth.db does not exist yet: serve creates it", "ok    no signing key yet", "all checks passed"},
		},
		{
			name: "missing directory", dbRel: "data/auth.db", env: withSecret,
			want:    []string{"FAIL  database ", "serve could not create it: directory ", "does not exist (serve creates the file, not its directory)", "1 problem found"},
			wantErr: true,
		},
		{
			name: "current schema", dbRel: "auth.db", env: withSecret, prepare: newSQLite,
			want: []string{"(schema version 7, current)", "ok    key ", "all checks passed"},
		},
		{
			name: "current schema, no secret", dbRel: "auth.db", env: map[string]string{}, prepare: newSQLite,
			want:    []string{"FAIL  AUTH_SECRET is not set", "(schema version 7, current)", "skip  keys: 1 key stored, not decrypted without the secret", "1 problem found"},
			wantErr: true,
		},
		{
			name: "old schema", dbRel: "auth.db", env: withSecret,
			prepare: func(t *testing.T, cfgPath, dbPath string) {
				newSQLite(t, cfgPath, dbPath)
				// As a binary from before 0003 left it (the tables of later
				// migrations do not matter to check: it reads the version).
				sqliteExec(t, dbPath, `DROP TABLE outbox`, `DROP TABLE recovery_token`, `PRAGMA user_version = 2`)
			},
			want: []string{"(schema version 2, this binary's is 7): 5 migrations pending; serve applies them", "ok    key ", "all checks passed"},
		},
		{
			name: "newer schema", dbRel: "auth.db", env: withSecret,
			prepare: func(t *testing.T, cfgPath, dbPath string) {
				newSQLite(t, cfgPath, dbPath)
				sqliteExec(t, dbPath, `PRAGMA user_version = 99`)
			},
			want:    []string{"FAIL  database ", "schema version 99 is newer than this binary knows (7)", "skip  keys: not checked", "1 problem found"},
			wantErr: true,
		},
		{
			name: "bad config and no secret", dbRel: "data/auth.db", env: map[string]string{},
			cfg: "database: { path: %q }\nauth:\n  jwt_tll: 1h\nroutes: { cookie_only: [nope] }\n",
			want: []string{
				"/sidecar.yaml:6: auth.jwt_tll: unknown key",
				"/sidecar.yaml:7: routes.cookie_only[0]",
				"FAIL  AUTH_SECRET is not set",
				"skip  database and keys: checked once the config loads",
				"3 problems found",
			},
			wantErr: true,
		},
		{
			name: "bad config names its secret variable", dbRel: "auth.db", env: withSecret,
			cfg:     "database: { path: %q }\nauth:\n  secret_env: MY_SECRET\n  jwt_ttl: forever\n",
			want:    []string{"/sidecar.yaml:7: auth.jwt_ttl: invalid duration", "FAIL  MY_SECRET is not set", "2 problems found"},
			wantErr: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			dbPath := filepath.Join(dir, tt.dbRel)
			body := tt.cfg
			if body == "" {
				body = "database: { path: %q }\n"
			}
			cfgPath, _ := writeConfigFile(t, dir, "sidecar.yaml", fmt.Sprintf(body, dbPath))
			if tt.prepare != nil {
				tt.prepare(t, cfgPath, dbPath)
			}
			before := fsSnapshot(t, dir)
			out, err := runCheck(t, cfgPath, tt.env)
			if after := fsSnapshot(t, dir); after != before {
				t.Errorf("check changed the file system:\nbefore:\n%s\nafter:\n%s", before, after)
			}
			if (err != nil) != tt.wantErr {
				t.Errorf("got error %v, want error: %v\n%s", err, tt.wantErr, out)
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("output does not hold %q:\n%s", w, out)
				}
			}
			if strings.Contains(out, "migrated") {
				t.Errorf("output says something was migrated:\n%s", out)
			}
		})
	}
}

// TestCheckLiveSQLite: beside a running sidecar (the database open, its
// -wal and -shm in use) check reads what is still only in the WAL, and
// changes neither the database file nor the WAL.
func TestCheckLiveSQLite(t *testing.T) {
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "auth.db")
	cfgPath, _ := writeConfigFile(t, dir, "sidecar.yaml", fmt.Sprintf("database: { path: %q }\n", dbPath))
	live, err := sqlstore.OpenSQLite(context.Background(), dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	mustCLI(t, e2eSecret, "", argv(cfgPath, "keys rotate")...) // committed to the WAL: live holds it open
	if _, err := os.Stat(dbPath + "-wal"); err != nil {
		t.Fatalf("no WAL beside a live database: %v", err)
	}
	files := func() string {
		// -shm is the live process's shared memory, which every reader
		// of a WAL database uses; the database and its log must not move.
		var b strings.Builder
		for _, p := range []string{dbPath, dbPath + "-wal"} {
			b.WriteString(fsSnapshot(t, p) + "\n")
		}
		return b.String()
	}
	before := files()
	out, err := runCheck(t, cfgPath, map[string]string{"AUTH_SECRET": e2eSecret})
	if err != nil || !strings.Contains(out, "ok    key ") {
		t.Fatalf("got %v, want the key committed to the WAL:\n%s", err, out)
	}
	if after := files(); after != before {
		t.Errorf("check changed the database:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// pgTables counts the tables in the database's own schemas.
func pgTables(t *testing.T, db *sql.DB) int {
	t.Helper()
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM information_schema.tables WHERE table_schema NOT IN ('pg_catalog', 'information_schema')`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestCheckReadOnlyPostgres: on an empty database check creates no table;
// on an old schema it applies no migration; on a newer one it fails; a
// missing DATABASE_URL is one more problem of the same run.
func TestCheckReadOnlyPostgres(t *testing.T) {
	url := pgtest.URL(t)
	raw, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	cfgPath, _ := replicaConfig(t, t.TempDir(), "pg.yaml", "http://127.0.0.1:1", "")
	env := map[string]string{"AUTH_SECRET": e2eSecret, "DATABASE_URL": url}

	out, err := runCheck(t, cfgPath, env)
	if err != nil || !strings.Contains(out, "has no authsidecar tables yet: serve creates them") || !strings.Contains(out, "all checks passed") {
		t.Errorf("empty database: got %v\n%s", err, out)
	}
	if n := pgTables(t, raw); n != 0 {
		t.Fatalf("check on an empty database: got %d tables after, want 0", n)
	}

	// Made as serve makes it, with a key; then as a binary from before
	// 0004 left it.
	db, err := sqlstore.OpenPostgres(context.Background(), sqlstore.PostgresOptions{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	cliWithEnv(t, env, argv(cfgPath, "keys rotate")...)
	for _, q := range []string{`DROP TABLE outbox`, `DROP TABLE recovery_token`, `DELETE FROM schema_migrations WHERE version >= 3`} {
		if _, err := raw.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	tables := pgTables(t, raw)
	out, err = runCheck(t, cfgPath, env)
	if err != nil || !strings.Contains(out, "(schema version 2, this binary's is 7): 5 migrations pending; serve applies them") || !strings.Contains(out, "ok    key ") {
		t.Errorf("old schema: got %v\n%s", err, out)
	}
	var version int
	if err := raw.QueryRow(`SELECT max(version) FROM schema_migrations`).Scan(&version); err != nil || version != 2 || pgTables(t, raw) != tables {
		t.Errorf("after check on an old schema: version %d (%v), %d tables; want 2 and %d: nothing migrated", version, err, pgTables(t, raw), tables)
	}

	if _, err := raw.Exec(`INSERT INTO schema_migrations (version, name) VALUES (99, '0099_future.sql')`); err != nil {
		t.Fatal(err)
	}
	out, err = runCheck(t, cfgPath, env)
	if err == nil || !strings.Contains(out, "FAIL  database: postgres://") || !strings.Contains(out, "newer than this binary") {
		t.Errorf("newer schema: got %v\n%s", err, out)
	}

	// No DATABASE_URL and no secret: both, in one run.
	out, err = runCheck(t, cfgPath, map[string]string{})
	if err == nil || !strings.Contains(out, "FAIL  AUTH_SECRET is not set") || !strings.Contains(out, "FAIL  database.url_env: $DATABASE_URL is not set") || !strings.Contains(out, "2 problems found") {
		t.Errorf("no DATABASE_URL, no secret: got %v\n%s", err, out)
	}
	if strings.Contains(out, urlPassword(t, url)) {
		t.Errorf("check output shows the database password:\n%s", out)
	}
}

// TestCheckPostgresTablesTaken: a database holding tables of authsidecar's
// names without its schema_migrations (Better Auth's own, say) would fail
// serve's first migration; check says so, and still creates nothing.
func TestCheckPostgresTablesTaken(t *testing.T) {
	url := pgtest.URL(t)
	raw, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if _, err := raw.Exec(`CREATE TABLE "user" (id TEXT PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	cfgPath, _ := replicaConfig(t, t.TempDir(), "pg.yaml", "http://127.0.0.1:1", "")
	out, err := runCheck(t, cfgPath, map[string]string{"AUTH_SECRET": e2eSecret, "DATABASE_URL": url})
	if err == nil || !strings.Contains(out, "tables named like authsidecar's exist in schema public (user)") {
		t.Errorf("got %v\n%s", err, out)
	}
	if n := pgTables(t, raw); n != 1 {
		t.Errorf("got %d tables after check, want the 1 planted", n)
	}
}

// TestCheckVerifierFiles: in verifier mode an unreadable keys.jwks_ca_file
// is named as such, and a JWKS that cannot be fetched is a problem; no
// secret is needed, and there is no database to touch.
func TestCheckVerifierFiles(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name, keys string
		want       string
	}{
		{"unreadable CA file", fmt.Sprintf("{ jwks_url: \"https://127.0.0.1:1/api/auth/jwks\", jwks_ca_file: %q }", filepath.Join(dir, "missing.pem")), "FAIL  keys.jwks_ca_file: jwks CA file: open "},
		{"JWKS unreachable", "{ jwks_url: \"http://127.0.0.1:1/api/auth/jwks\" }", "FAIL  keys.jwks_url: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfgPath, _ := writeConfigFile(t, dir, "verifier.yaml", "mode: verifier\nkeys: "+tt.keys+"\n")
			before := fsSnapshot(t, dir)
			out, err := runCheck(t, cfgPath, map[string]string{})
			if err == nil || !strings.Contains(out, tt.want) || !strings.Contains(out, "ok    no database (verifier mode)") || !strings.Contains(out, "1 problem found") {
				t.Errorf("got %v, want %q and one problem:\n%s", err, tt.want, out)
			}
			if after := fsSnapshot(t, dir); after != before {
				t.Errorf("check changed the file system:\nbefore:\n%s\nafter:\n%s", before, after)
			}
		})
	}
}

// TestCheckSQLitePathWithURICharacters: check reads the database file
// named, even when its name holds "?", "#" or "%": before serve made it,
// "does not exist yet"; after, its keys; and it creates nothing.
func TestCheckSQLitePathWithURICharacters(t *testing.T) {
	for _, name := range []string{"auth?x=1.db", "auth#1.db", "auth%41.db"} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			dbPath := filepath.Join(dir, "data", name)
			if err := os.Mkdir(filepath.Dir(dbPath), 0o700); err != nil {
				t.Fatal(err)
			}
			cfgPath, _ := writeConfigFile(t, dir, "sidecar.yaml", fmt.Sprintf("database: { path: %q }\n", dbPath))
			env := map[string]string{"AUTH_SECRET": e2eSecret}
			before := fsSnapshot(t, filepath.Dir(dbPath))
			if out, err := runCheck(t, cfgPath, env); err != nil || !strings.Contains(out, "database "+dbPath+" does not exist yet") {
				t.Errorf("before the database exists: got %v\n%s", err, out)
			}
			if after := fsSnapshot(t, filepath.Dir(dbPath)); after != before {
				t.Errorf("check created files:\n%s", after)
			}
			db, err := sqlstore.OpenSQLite(context.Background(), dbPath) // as serve does
			if err != nil {
				t.Fatal(err)
			}
			db.Close()
			mustCLI(t, e2eSecret, "", argv(cfgPath, "keys rotate")...)
			out, err := runCheck(t, cfgPath, env)
			if err != nil || !strings.Contains(out, "ok    key ") || !strings.Contains(out, "database "+dbPath+" (schema version") {
				t.Errorf("after serve's open and keys rotate: got %v\n%s", err, out)
			}
			if ents, _ := os.ReadDir(filepath.Dir(dbPath)); len(ents) != 1 && len(ents) != 3 {
				t.Errorf("files beside the database: %v, want only it (and its -wal, -shm)", ents)
			}
		})
	}
}

// TestCheckProbesNetwork: check says what serve would meet on the
// network: whether anything listens at the upstream (a warning when not:
// serve starts, business requests get 502) and whether the listen
// addresses are free (a warning when taken: serve could not bind them;
// check is also run beside a live sidecar, which holds them).
func TestCheckProbesNetwork(t *testing.T) {
	listening, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer listening.Close()
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	closedAddr := closed.Addr().String()
	closed.Close()
	busy, _ := net.Listen("tcp", "127.0.0.1:0")
	defer busy.Close()
	free, _ := net.Listen("tcp", "127.0.0.1:0")
	freeAddr := free.Addr().String()
	free.Close()
	free2, _ := net.Listen("tcp", "127.0.0.1:0")
	free2Addr := free2.Addr().String()
	free2.Close()

	tests := []struct {
		name, yaml string
		want       []string
	}{
		{"all well", fmt.Sprintf("upstream: \"http://%s\"\nlisten: %q\nmetrics: { listen: %q }\n", listening.Addr(), freeAddr, free2Addr),
			[]string{"ok    upstream http://" + listening.Addr().String() + " accepts connections", "ok    listen " + freeAddr + " is free", "ok    metrics.listen " + free2Addr + " is free"}},
		{"nothing at the upstream", fmt.Sprintf("upstream: \"http://%s/app\"\nlisten: %q\nmetrics: { listen: %q }\n", closedAddr, freeAddr, free2Addr),
			[]string{"WARN  upstream http://" + closedAddr + "/app: nothing accepts connections at " + closedAddr}},
		{"listen taken", fmt.Sprintf("upstream: \"http://%s\"\nlisten: %q\nmetrics: { listen: %q }\n", listening.Addr(), busy.Addr(), free2Addr),
			[]string{"WARN  listen " + busy.Addr().String() + " is in use: serve could not bind it"}},
		{"metrics listen taken", fmt.Sprintf("upstream: \"http://%s\"\nlisten: %q\nmetrics: { listen: %q }\n", listening.Addr(), freeAddr, busy.Addr()),
			[]string{"WARN  metrics.listen " + busy.Addr().String() + " is in use: serve could not bind it"}},
		{"verifier without a database", fmt.Sprintf("mode: verifier\nupstream: \"http://%s\"\nlisten: %q\nmetrics: { listen: %q }\nkeys: { jwks_url: \"http://%s/api/auth/jwks\" }\n", listening.Addr(), freeAddr, free2Addr, closedAddr),
			[]string{"WARN  routes.admin /api/admin/: answered 403: a verifier without a database cannot read roles (routes.admin: [] forwards these paths to an upstream that checks roles itself)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			cfgPath := filepath.Join(dir, "sidecar.yaml")
			file := tt.yaml
			if !strings.HasPrefix(file, "mode: verifier") {
				file += fmt.Sprintf("database: { path: %q }\n", filepath.Join(dir, "auth.db"))
			}
			writeFile(t, cfgPath, file)
			out, _ := runCheck(t, cfgPath, map[string]string{"AUTH_SECRET": e2eSecret})
			for _, w := range tt.want {
				if !strings.Contains(out, "\n"+w) {
					t.Errorf("check: no line %q in\n%s", w, out)
				}
			}
		})
	}
}
