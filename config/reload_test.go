package config

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestRestartKeys(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Config)
		want   []string // nil: reloadable
	}{
		{"nothing", func(*Config) {}, nil},
		{"listen", func(c *Config) { c.Listen = "127.0.0.1:8081" }, []string{"listen"}},
		{"base_url", func(c *Config) { c.BaseURL = "https://app.example.com" }, []string{"base_url"}},
		{"upstream", func(c *Config) { c.Upstream = "http://127.0.0.1:3001" }, []string{"upstream"}},
		{"mode", func(c *Config) { c.Mode = "verifier" }, []string{"mode"}},
		{"database.driver", func(c *Config) { c.Database.Driver = "postgres" }, []string{"database.driver"}},
		{"database.path", func(c *Config) { c.Database.Path = "other.db" }, []string{"database.path"}},
		{"auth.secret_env", func(c *Config) { c.Auth.SecretEnv = "OTHER" }, []string{"auth.secret_env"}},
		{"auth.jwt_ttl", func(c *Config) { c.Auth.JWTTTL = Duration(time.Hour) }, []string{"auth.jwt_ttl"}},
		{"keys.jwks_url", func(c *Config) { c.Keys.JWKSURL = "https://issuer.example.com/api/auth/jwks" }, []string{"keys.jwks_url"}},
		{"metrics.listen", func(c *Config) { c.Metrics.Listen = "127.0.0.1:9091" }, []string{"metrics.listen"}},
		{"log.format", func(c *Config) { c.Log.Format = "text" }, []string{"log.format"}},
		{"shutdown.grace", func(c *Config) { c.Shutdown.Grace = Duration(time.Second) }, []string{"shutdown.grace"}},
		{"cache.verified_tokens", func(c *Config) { c.Cache.VerifiedTokens = 1 }, []string{"cache.verified_tokens"}},
		{"upstream pool (one, shared across reloads)", func(c *Config) { c.Proxy.UpstreamMaxConns, c.Proxy.UpstreamMaxPending = 8, 8 },
			[]string{"proxy.upstream_max_conns", "proxy.upstream_max_pending"}},
		{"proxy.upstream_client_share (the pool's)", func(c *Config) { c.Proxy.UpstreamClientShare = 50 }, []string{"proxy.upstream_client_share"}},
		{"two, in type order", func(c *Config) { c.Metrics.Listen, c.Listen = "127.0.0.1:9091", "127.0.0.1:8081" }, []string{"listen", "metrics.listen"}},
		{"restart key among reloadable ones", func(c *Config) {
			c.CORS.MaxAge, c.Database.MaxConns = 0, 3
		}, []string{"database.max_conns"}},

		{"auth.trusted_origins", func(c *Config) { c.Auth.TrustedOrigins = []string{"https://a.example.com"} }, nil},
		{"cors.allow_credentials", func(c *Config) { c.CORS.AllowCredentials = false }, nil},
		{"cors.max_age", func(c *Config) { c.CORS.MaxAge = 0 }, nil},
		{"routes.passthrough", func(c *Config) { c.Routes.Passthrough = nil }, nil},
		{"routes.admin", func(c *Config) { c.Routes.Admin[0].Roles = []string{"ops"} }, nil},
		{"routes.identity_header", func(c *Config) { c.Routes.IdentityHeader = "X-Uid" }, nil},
		{"limits.signin_per_ip", func(c *Config) { c.Limits.SigninPerIP = Rate{N: 1, Per: time.Second} }, nil},
		{"limits.body_bytes", func(c *Config) { c.Limits.BodyBytes = 2048 }, nil},
		{"proxy.strip_headers", func(c *Config) { c.Proxy.StripHeaders = []string{"X-Route"} }, nil},
		{"proxy.allowed_hosts", func(c *Config) { c.Proxy.AllowedHosts = []string{"app.example.com"} }, nil},
		{"proxy.trusted_proxies", func(c *Config) { c.Proxy.TrustedProxies = []string{"10.0.0.0/8"} }, nil},
		{"proxy.forward_authorization", func(c *Config) { c.Proxy.ForwardAuthorization = true }, nil},
		{"proxy.body_min_rate", func(c *Config) { c.Proxy.BodyMinRate = 0 }, nil},
		{"proxy.body_rate_grace", func(c *Config) { c.Proxy.BodyRateGrace = Duration(time.Minute) }, nil},
		{"proxy.body_buffer", func(c *Config) { c.Proxy.BodyBuffer = 0 }, nil},
		{"log.level", func(c *Config) { c.Log.Level = "debug" }, nil},
		{"log.access", func(c *Config) { c.Log.Access = false }, nil},
		{"keys.max_age", func(c *Config) { c.Keys.MaxAge = Duration(time.Minute) }, nil},
		{"keys.cooldown", func(c *Config) { c.Keys.Cooldown = Duration(time.Second) }, nil},
		{"keys.stale_if_error", func(c *Config) { c.Keys.StaleIfError = Duration(time.Minute) }, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			next := Default()
			tt.change(&next)
			if got := RestartKeys(Default(), next); !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// TestRestartKeysVerifier: a verifier also reloads its JWKS URL and CA
// file; a full sidecar does not, and neither does a change of mode.
func TestRestartKeysVerifier(t *testing.T) {
	const otherURL = "https://other.example.com/api/auth/jwks"
	tests := []struct {
		name   string
		old    Config
		change func(*Config)
		want   []string // nil: reloadable
	}{
		{"verifier: keys.jwks_url", verifierConfig(), func(c *Config) { c.Keys.JWKSURL = otherURL }, nil},
		{"verifier: keys.jwks_ca_file", verifierConfig(), func(c *Config) { c.Keys.JWKSCAFile = "ca.pem" }, nil},
		{"verifier: both, and stale_if_error", verifierConfig(), func(c *Config) {
			c.Keys.JWKSURL, c.Keys.JWKSCAFile, c.Keys.StaleIfError = otherURL, "ca.pem", Duration(time.Minute)
		}, nil},
		{"verifier: keys.jwks_url with listen", verifierConfig(), func(c *Config) { c.Keys.JWKSURL, c.Listen = otherURL, "127.0.0.1:8081" }, []string{"listen"}},
		{"verifier: auth.issuer", verifierConfig(), func(c *Config) { c.Auth.Issuer = "https://issuer.example.com" }, []string{"auth.issuer"}},
		{"full: keys.jwks_ca_file", Default(), func(c *Config) { c.Keys.JWKSCAFile = "ca.pem" }, []string{"keys.jwks_ca_file"}},
		{"verifier to full", verifierConfig(), func(c *Config) { c.Mode, c.Keys.JWKSURL = "full", "" }, []string{"mode", "keys.jwks_url"}},
		{"full to verifier", Default(), func(c *Config) { c.Mode, c.Keys.JWKSURL = "verifier", otherURL }, []string{"mode", "keys.jwks_url"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			next := tt.old
			tt.change(&next)
			if got := RestartKeys(tt.old, next); !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// verifierConfig is Default in mode verifier.
func verifierConfig() Config {
	c := Default()
	c.Mode, c.Keys.JWKSURL = "verifier", "https://issuer.example.com/api/auth/jwks"
	return c
}

// TestRestartKeysCoverEveryKey changes every leaf of the Config type in
// turn: each must be named by RestartKeys unless it is under a Reloadable
// path, so a key added later is a restart key until someone makes it
// reloadable on purpose.
func TestRestartKeysCoverEveryKey(t *testing.T) {
	for _, base := range []struct {
		name       string
		cfg        func() Config
		reloadable []string
	}{
		{"full", Default, Reloadable},
		{"verifier", verifierConfig, append(slices.Clip(Reloadable), VerifierReloadable...)},
	} {
		t.Run(base.name, func(t *testing.T) {
			var leaves []string
			walkLeaves(reflect.TypeFor[Config](), "", func(path string, index []int) {
				leaves = append(leaves, path)
				t.Run(path, func(t *testing.T) {
					next := base.cfg()
					if !bump(reflect.ValueOf(&next).Elem().FieldByIndex(index)) {
						t.Fatalf("cannot change a %s", reflect.ValueOf(next).FieldByIndex(index).Type())
					}
					got := RestartKeys(base.cfg(), next)
					if isReloadable(path, base.reloadable) {
						if len(got) != 0 {
							t.Errorf("reloadable key: got restart keys %q, want none", got)
						}
						return
					}
					if !slices.Equal(got, []string{path}) {
						t.Errorf("got %q, want [%q]", got, path)
					}
				})
			})
			if len(leaves) < 40 {
				t.Fatalf("walked only %d keys: is the walk broken?", len(leaves))
			}
			for _, p := range base.reloadable {
				if !slices.ContainsFunc(leaves, func(l string) bool { return l == p || strings.HasPrefix(l, p+".") }) {
					t.Errorf("reloadable list names %q, which is no key", p)
				}
			}
		})
	}
}

func walkLeaves(t reflect.Type, path string, f func(path string, index []int), index ...int) {
	if t.Kind() != reflect.Struct || reflect.PointerTo(t).Implements(unmarshalerType) {
		f(path, index)
		return
	}
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		if name == "" {
			panic("config field without a YAML name: " + t.Field(i).Name)
		}
		if path != "" {
			name = path + "." + name
		}
		walkLeaves(t.Field(i).Type, name, f, append(slices.Clone(index), i)...)
	}
}

// bump changes v to a different value of its type.
func bump(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.String:
		v.SetString(v.String() + "x")
	case reflect.Int, reflect.Int64:
		v.SetInt(v.Int() + 1)
	case reflect.Bool:
		v.SetBool(!v.Bool())
	case reflect.Slice:
		v.Set(reflect.Append(v, reflect.Zero(v.Type().Elem())))
	case reflect.Struct: // Rate
		return bump(v.Field(0))
	default:
		return false
	}
	return true
}
