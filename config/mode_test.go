package config

import (
	"reflect"
	"strings"
	"testing"
)

// TestMinimalVerifier: the minimal verifier config parses, and
// verifier mode's defaults (no database, no cookie-only routes) apply to
// the keys it leaves out. The default admin routes stay: without a
// database they are answered 403, never forwarded (TestVerifierAdminRoutes).
func TestMinimalVerifier(t *testing.T) {
	cfg, err := Parse("verifier.yaml", []byte(`mode: verifier
listen: "127.0.0.1:8081"
base_url: "https://api2.example.com"
upstream: "http://127.0.0.1:4000"
keys:
  jwks_url: "https://auth.example.com:8443/api/auth/jwks"
metrics:
  listen: "127.0.0.1:9091"
`))
	if err != nil {
		t.Fatalf("got %v, want the minimal verifier config to parse", err)
	}
	if cfg.Database.Driver != "none" || len(cfg.Routes.CookieOnly) != 0 || !reflect.DeepEqual(cfg.Routes.Admin, Default().Routes.Admin) {
		t.Errorf("got driver %q, cookie_only %v, admin %v; want none, none and the default admin routes", cfg.Database.Driver, cfg.Routes.CookieOnly, cfg.Routes.Admin)
	}
	if cfg.NeedsSecret() {
		t.Error("got NeedsSecret true, want a verifier without cookie routes to need no AUTH_SECRET")
	}
	if got, want := cfg.JWTIssuer(), "https://auth.example.com:8443"; got != want {
		t.Errorf("JWTIssuer: got %q, want %q (the jwks_url's origin)", got, want)
	}
}

// TestVerifierOnPostgres: with the issuers' postgres database, a verifier
// may serve cookie-only and admin routes, and then needs the secret (the
// cookie is signed with it).
func TestVerifierOnPostgres(t *testing.T) {
	cfg, err := Parse("v.yaml", []byte(`mode: verifier
database:
  driver: postgres
keys:
  jwks_url: "http://127.0.0.1:8080/api/auth/jwks"
routes:
  cookie_only: [/api/mcp-oauth/authorize]
auth:
  issuer: "https://auth.example.com"
`))
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.NeedsSecret() || !reflect.DeepEqual(cfg.Routes.Admin, Default().Routes.Admin) || cfg.JWTIssuer() != "https://auth.example.com" {
		t.Errorf("got NeedsSecret %v, admin %v, issuer %q", cfg.NeedsSecret(), cfg.Routes.Admin, cfg.JWTIssuer())
	}
}

func TestLoadDatabaseURL(t *testing.T) {
	const pw = "s3cr3t-pa55word"
	pg := Default()
	pg.Database.Driver = "postgres"
	tests := []struct {
		name string
		env  map[string]string
		want string // error substring; "" means success
	}{
		{"unset", map[string]string{}, "database.url_env: $DATABASE_URL is not set"},
		{"empty", map[string]string{"DATABASE_URL": ""}, "is not set"},
		{"not a url", map[string]string{"DATABASE_URL": "postgres://u:" + pw + "@h:99999999999/db\x7f"}, "is not a URL"},
		{"wrong scheme", map[string]string{"DATABASE_URL": "mysql://u:" + pw + "@h/db"}, `must be a postgres:// or postgresql:// URL, got scheme "mysql"`},
		{"ok", map[string]string{"DATABASE_URL": "postgres://u:" + pw + "@127.0.0.1:5432/db?sslmode=disable"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := pg.LoadDatabaseURL(func(k string) string { return tt.env[k] })
			if tt.want == "" {
				if err != nil || !strings.Contains(string(s.Bytes()), pw) {
					t.Fatalf("got %v, want the URL", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an error containing %q", err, tt.want)
			}
			if strings.Contains(err.Error(), pw) {
				t.Fatalf("the error %q shows the password", err)
			}
		})
	}
	// Other drivers need no URL.
	if s, err := Default().LoadDatabaseURL(func(string) string { return "" }); err != nil || s.Bytes() != nil {
		t.Errorf("sqlite: got %v %v, want no URL and no error", s, err)
	}
}

// TestVerifierAdminRoutes: a verifier never forwards a route whose role it
// cannot check. Without a database the admin routes (the default ones
// included) stay, and the sidecar answers them 403; written out they are
// refused at start, at their line; "routes.admin: []" is the explicit way
// to forward them to an upstream that checks roles itself. With a
// database they are role-checked as in full mode.
func TestVerifierAdminRoutes(t *testing.T) {
	const head = "mode: verifier\nkeys: { jwks_url: \"https://auth.example.com/api/auth/jwks\" }\n"
	def := Default().Routes.Admin
	tests := []struct {
		name, file string
		want       []AdminRoute
		err        string
	}{
		{"no database, unset", head, def, ""},
		{"no database, opted out", head + "routes: { admin: [] }\n", []AdminRoute{}, ""},
		{"no database, written", head + "routes:\n  admin:\n    - { prefix: /api/ops/, roles: [ops] }\n", nil,
			`v.yaml:4: routes.admin: needs a database to read user_role, and database.driver is "none": remove the routes, write routes.admin: [] if the upstream checks roles itself, or use the issuers' postgres database`},
		{"database, unset", head + "database: { driver: postgres }\n", def, ""},
		{"database, written", head + "database: { driver: postgres }\nroutes: { admin: [{ prefix: /api/ops/, roles: [ops] }] }\n", []AdminRoute{{Prefix: "/api/ops/", Roles: []string{"ops"}}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse("v.yaml", []byte(tt.file))
			if tt.err != "" {
				if err == nil || err.Error() != tt.err {
					t.Fatalf("got %v, want %s", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(cfg.Routes.Admin, tt.want) {
				t.Errorf("routes.admin: got %+v, want %+v", cfg.Routes.Admin, tt.want)
			}
		})
	}
}
