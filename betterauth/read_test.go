package betterauth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/chacha20poly1305"

	"github.com/authsidecar/authsidecar/issuer"
)

// A key, its secret and a password hash a real Better Auth 1.7.25 wrote
// (issuer/betterauth_test.go pins the same vectors). TestImportBetterAuth
// in cmd/authsidecar reads whole databases Better Auth made; these tests
// make the rows it rarely makes (bans, impersonation, other providers,
// refusals) by hand, in its schema.
const (
	baSecret     = "test-secret-0123456789abcdefghijklmnopqrstuvwxyzABCDEF"
	baPublicKey  = `{"crv":"Ed25519","x":"RsD-7wF8-0tY_RjOzxXMDIcKHY9HiQdyrWloqoKm_YE","kty":"OKP"}`
	baPrivateKey = `"7983e1a73cdcdfcb34a32501ecfd144aed8515fee90b82f9f17c20af500365cb35f535f222d4943041baac77b009108f0b8f22a9341f1320b4941aa6b00df09ad3dd1e3ba56c27dd1a84eeac81a48e403248a9f925b2626754a2389d62d7273714d6880b30d2b0adb849ea81ea396a8d2c482c798e7463e2fb73f41480aadf888a69ca1ea0962a1130316ad079ba054670a803d5802fd3161759af4c07035f52d16634045c305fa4a7"`
	baHash       = "688ed2eed5afa35b87328d81d7008bb0:45a8ebd51eb99f5a907091161a76ffd741c9308c4d22a42e7f10e478d0862331f88edd11e4fb7dbcc62c9b4af68e56633c41341778a484a2762e19e6aba7ea04"
	authSecret   = "0123456789abcdefghijklmnopqrstuvwxyz-new-secret"
)

// schemaSQL is Better Auth 1.7's SQLite schema as its migrations make it,
// with the admin and jwt() plugins' columns and table, and a two-factor
// plugin's column and table.
const schemaSQL = `
CREATE TABLE "user" ("id" text not null primary key, "name" text not null, "email" text not null unique, "emailVerified" integer not null, "image" text, "createdAt" date not null, "updatedAt" date not null, "role" text, "banned" integer, "banReason" text, "banExpires" date, "twoFactorEnabled" integer);
CREATE TABLE "session" ("id" text not null primary key, "expiresAt" date not null, "token" text not null unique, "createdAt" date not null, "updatedAt" date not null, "ipAddress" text, "userAgent" text, "userId" text not null references "user" ("id") on delete cascade, "impersonatedBy" text);
CREATE TABLE "account" ("id" text not null primary key, "accountId" text not null, "providerId" text not null, "userId" text not null references "user" ("id") on delete cascade, "accessToken" text, "refreshToken" text, "idToken" text, "accessTokenExpiresAt" date, "refreshTokenExpiresAt" date, "scope" text, "password" text, "createdAt" date not null, "updatedAt" date not null);
CREATE TABLE "verification" ("id" text not null primary key, "identifier" text not null, "value" text not null, "expiresAt" date not null, "createdAt" date not null, "updatedAt" date not null);
CREATE TABLE "jwks" ("id" text not null primary key, "publicKey" text not null, "privateKey" text not null, "createdAt" date not null, "expiresAt" date, "alg" text, "crv" text);
CREATE TABLE "twoFactor" ("id" text not null primary key, "secret" text not null, "backupCodes" text not null, "userId" text not null);
`

var now = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

// iso is a date as Better Auth's SQLite adapter stores it.
func iso(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// baEncrypt is Better Auth's symmetricEncrypt with a plain secret.
func baEncrypt(t *testing.T, secret, plain string) string {
	t.Helper()
	k := sha256Key(secret)
	aead, _ := chacha20poly1305.NewX(k)
	nonce := make([]byte, aead.NonceSize())
	rand.Read(nonce)
	return hex.EncodeToString(aead.Seal(nonce, nonce, []byte(plain), nil))
}

// makeDB writes a Better Auth SQLite database with stmts run after the
// schema, and returns its -from.
func makeDB(t *testing.T, stmts ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ba.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, s := range append([]string{schemaSQL}, stmts...) {
		if _, err := db.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	return "sqlite:" + path
}

func read(t *testing.T, from string, o Options) (Result, error) {
	t.Helper()
	src, err := Open(context.Background(), from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if o.BetterAuthSecret == nil {
		o.BetterAuthSecret = []byte(baSecret)
	}
	o.AuthSecret, o.Now = []byte(authSecret), func() time.Time { return now }
	return src.Read(context.Background(), o)
}

// TestRead: what is carried, with what changes, and what is left behind
// and said so.
func TestRead(t *testing.T) {
	created, live, past := iso(now.Add(-48*time.Hour)), iso(now.Add(72*time.Hour)), iso(now.Add(-time.Hour))
	from := makeDB(t,
		`INSERT INTO "user" VALUES ('u1', 'Ann', 'Ann@Example.com', 1, 'https://img.example/a.png', '`+created+`', '`+created+`', 'admin, ops,Bad Role,admin', 0, NULL, NULL, 1)`,
		`INSERT INTO "user" VALUES ('42', 'Bob', 'bob@example.com', 0, 'data:image/png;base64,AAAA', `+"1714564800000"+`, `+"1714564800000"+`, 'user', 1, 'spam', '`+live+`', 0)`,
		`INSERT INTO account VALUES ('a1', 'u1', 'credential', 'u1', NULL, NULL, NULL, NULL, NULL, NULL, '`+baHash+`', '`+created+`', '`+created+`')`,
		`INSERT INTO account VALUES ('a2', 'sub-ann', 'corp', 'u1', '`+baEncrypt(t, baSecret, "at-ann")+`', 'rt-clear', NULL, '`+live+`', NULL, 'openid,email', NULL, '`+created+`', '`+created+`')`,
		`INSERT INTO account VALUES ('a3', '1234', 'github', '42', 'gho_x', NULL, NULL, NULL, NULL, NULL, NULL, '`+created+`', '`+created+`')`,
		`INSERT INTO account VALUES ('a4', '42', 'credential', '42', NULL, NULL, NULL, NULL, NULL, NULL, 'plain-text-password', '`+created+`', '`+created+`')`,
		`INSERT INTO session VALUES ('s1', '`+live+`', 'tok-live', '`+created+`', '`+created+`', '203.0.113.9', 'Firefox', 'u1', NULL)`,
		`INSERT INTO session VALUES ('s2', '`+past+`', 'tok-expired', '`+created+`', '`+created+`', NULL, NULL, 'u1', NULL)`,
		`INSERT INTO session VALUES ('s3', '`+live+`', 'tok-imp', '`+created+`', '`+created+`', NULL, NULL, '42', 'u1')`,
		`INSERT INTO verification VALUES ('v1', 'reset-password:x', 'u1', '`+live+`', '`+created+`', '`+created+`')`,
		`INSERT INTO verification VALUES ('v2', 'reset-password:y', 'u1', '`+past+`', '`+created+`', '`+created+`')`,
		`INSERT INTO jwks VALUES ('kid-1', '`+baPublicKey+`', '`+strings.ReplaceAll(baPrivateKey, "'", "''")+`', '`+created+`', NULL, 'EdDSA', 'Ed25519')`,
		`INSERT INTO "twoFactor" VALUES ('t1', 's', 'c', 'u1')`,
	)
	res, err := read(t, from, Options{Providers: []string{"corp"}})
	if err != nil {
		t.Fatal(err)
	}
	rep := res.Report
	if got := [...]int{rep.Users, rep.Passwords, rep.ProviderAccounts, rep.Sessions, rep.ExpiredSessions, rep.Keys, rep.Roles, rep.Bans}; got != [...]int{2, 1, 1, 1, 1, 1, 3, 1} {
		t.Errorf("users, passwords, provider accounts, sessions, expired, keys, roles, bans: got %v, want [2 1 1 1 1 1 3 1]", got)
	}
	var notes []string
	for _, n := range rep.Notes {
		notes = append(notes, n.What)
	}
	for _, want := range []string{`role "Bad Role"`, "accounts of provider github", "passwords the sidecar cannot verify", "impersonation", "verification rows", "images that are no URL"} {
		if !strings.Contains(strings.Join(notes, "\n"), want) {
			t.Errorf("notes %q: want one about %q", notes, want)
		}
	}
	if !reflect.DeepEqual(rep.Tables, []TableRows{{"twoFactor", 1}}) || !reflect.DeepEqual(rep.IgnoredColumns, []string{"user.twoFactorEnabled"}) {
		t.Errorf("tables %v, columns %v: want twoFactor (1 row) and user.twoFactorEnabled", rep.Tables, rep.IgnoredColumns)
	}

	snap := res.Snapshot
	ann, bob := snap.Users[1], snap.Users[0] // by createdAt: Bob's is 2024
	if ann.ID != "u1" || ann.Email != "ann@example.com" || !ann.EmailVerified || ann.Image == nil || ann.Ban.Banned || !ann.CreatedAt.Equal(now.Add(-48*time.Hour)) {
		t.Errorf("Ann: got %+v", ann)
	}
	if bob.ID != "42" || bob.Image != nil || !bob.Ban.Banned || bob.Ban.Reason != "spam" || !bob.Ban.Expires.Equal(now.Add(72*time.Hour)) || !bob.CreatedAt.Equal(time.UnixMilli(1714564800000)) {
		t.Errorf("Bob: got %+v", bob)
	}
	var roles []string
	for _, g := range snap.Roles {
		roles = append(roles, g.UserID+":"+g.Role)
	}
	if strings.Join(roles, " ") != "42:user u1:admin u1:ops" {
		t.Errorf("roles: got %v", roles)
	}
	if len(snap.Accounts) != 2 {
		t.Fatalf("accounts: got %+v, want Ann's password and corp", snap.Accounts)
	}
	for _, a := range snap.Accounts {
		switch a.ProviderID {
		case "credential":
			if a.Password == nil || *a.Password != baHash || a.AccountID != "u1" {
				t.Errorf("Ann's password: got %+v", a)
			}
		case "corp":
			if a.AccountID != "sub-ann" || a.Scope != "openid,email" || len(a.AccessToken) == 0 || len(a.RefreshToken) == 0 || a.IDToken != nil ||
				strings.Contains(string(a.AccessToken), "at-ann") || strings.Contains(string(a.RefreshToken), "rt-clear") {
				t.Errorf("corp: got %+v, want both tokens sealed", a)
			}
		}
	}
	if s := snap.Sessions; len(s) != 1 || s[0].Token != "tok-live" || s[0].UserID != "u1" || !s[0].Remember || s[0].IPAddress != "203.0.113.9" {
		t.Errorf("sessions: got %+v", s)
	}
	if k := snap.Keys; len(k) != 1 || k[0].ID != "kid-1" || strings.Contains(k[0].PrivateKey, baPrivateKey[1:20]) {
		t.Errorf("keys: got %+v, want kid-1 sealed anew", k)
	}
}

// TestReadTokensOpen: the provider tokens read are the ones Better Auth
// held, encrypted or not, sealed for the account's row.
func TestReadTokensOpen(t *testing.T) {
	created := iso(now)
	from := makeDB(t,
		`INSERT INTO "user" VALUES ('u1', 'Ann', 'ann@example.com', 1, NULL, '`+created+`', '`+created+`', NULL, NULL, NULL, NULL, NULL)`,
		`INSERT INTO account VALUES ('a2', 'sub-ann', 'corp', 'u1', '`+baEncrypt(t, baSecret, "at-ann")+`', 'rt-clear', NULL, NULL, NULL, NULL, NULL, '`+created+`', '`+created+`')`,
	)
	res, err := read(t, from, Options{Providers: []string{"corp"}})
	if err != nil {
		t.Fatal(err)
	}
	a := res.Snapshot.Accounts[0]
	want, _ := issuer.SealAccountTokens([]byte(authSecret), issuer.Account{ID: a.ID}, issuer.ProviderTokens{AccessToken: "at-ann", RefreshToken: "rt-clear"})
	// Sealing is randomized: compare the lengths (nonce, text, tag), and
	// let the issuer's own tests pin that such a seal opens.
	if len(a.AccessToken) != len(want.AccessToken) || len(a.RefreshToken) != len(want.RefreshToken) {
		t.Errorf("sealed lengths: got %d %d, want %d %d (the tokens as Better Auth held them)", len(a.AccessToken), len(a.RefreshToken), len(want.AccessToken), len(want.RefreshToken))
	}
}

// TestReadRefuses: a user the sidecar cannot take stops the read, every
// such user named; and a secret that does not open Better Auth's key is
// not its secret.
func TestReadRefuses(t *testing.T) {
	created := iso(now)
	user := func(id, email string) string {
		return `INSERT INTO "user" VALUES ('` + id + `', 'N', '` + email + `', 0, NULL, '` + created + `', '` + created + `', NULL, NULL, NULL, NULL, NULL)`
	}
	from := makeDB(t, user("auth0|5f0c", "a@example.com"), user("u2", "not an address"), user("u3", "Dup@example.com"), user("u4", "dup@example.com"))
	_, err := read(t, from, Options{})
	if !errors.Is(err, ErrRefused) {
		t.Fatalf("got %v, want ErrRefused", err)
	}
	for _, want := range []string{`user "auth0|5f0c": the id`, `user "u2": email "not an address"`, `user "u4": email "dup@example.com" is also user "u3"'s`, "users that cannot be carried: 3;"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("got %v, want %q in it", err, want)
		}
	}

	keyDB := makeDB(t, `INSERT INTO jwks VALUES ('kid-1', '`+baPublicKey+`', '`+baPrivateKey+`', '`+created+`', NULL, 'EdDSA', 'Ed25519')`)
	if _, err := read(t, keyDB, Options{BetterAuthSecret: []byte("another secret")}); !errors.Is(err, issuer.ErrBetterAuthSecret) {
		t.Errorf("another secret: got %v, want ErrBetterAuthSecret", err)
	}
}

// TestReadNotBetterAuth: a database of another schema (the sidecar's own,
// snake_case) is refused with what it lacks, and nothing else is read.
func TestReadNotBetterAuth(t *testing.T) {
	path := filepath.Join(t.TempDir(), "other.db")
	db, _ := sql.Open("sqlite", path)
	if _, err := db.Exec(`CREATE TABLE "user" (id TEXT PRIMARY KEY, name TEXT, email TEXT, email_verified INTEGER, created_at INTEGER, updated_at INTEGER); CREATE TABLE account (id TEXT); CREATE TABLE session (id TEXT)`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	_, err := read(t, "sqlite:"+path, Options{})
	if err == nil || !strings.Contains(err.Error(), `is not a Better Auth database: table "user" lacks the columns emailVerified, createdAt, updatedAt`) {
		t.Errorf("got %v", err)
	}
	for _, from := range []string{"mysql://x", "sqlite:" + filepath.Join(t.TempDir(), "missing.db")} {
		if _, err := Open(context.Background(), from); err == nil {
			t.Errorf("Open(%q): got nil, want an error", from)
		}
	}
}

func sha256Key(secret string) []byte {
	k := sha256.Sum256([]byte(secret))
	return k[:]
}
