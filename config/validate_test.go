package config

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestValidate covers Validate on Configs built in code: no file, so
// messages carry the YAML path but no line.
func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Config)
		want   string // "" means valid
	}{
		{"defaults", func(*Config) {}, ""},
		{"listen on all interfaces", func(c *Config) { c.Listen = ":8080" }, ""},
		{"listen on IPv6", func(c *Config) { c.Listen = "[::1]:8080" }, ""},
		{"both listeners on port 0", func(c *Config) { c.Listen, c.Metrics.Listen = "127.0.0.1:0", "127.0.0.1:0" }, ""},
		{"listen port too large", func(c *Config) { c.Listen = "127.0.0.1:65536" },
			`listen: "127.0.0.1:65536": port must be a number from 0 to 65535`},
		{"listen empty", func(c *Config) { c.Listen = "" },
			`listen: "" is not host:port (e.g. 127.0.0.1:8080): missing port in address`},
		{"metrics listen same as listen", func(c *Config) { c.Metrics.Listen = c.Listen },
			`metrics.listen: must differ from listen (both are "127.0.0.1:8080")`},
		{"base_url with path", func(c *Config) { c.BaseURL = "https://example.com/app/" }, ""},
		{"base_url fragment", func(c *Config) { c.BaseURL = "https://example.com/#x" },
			`base_url: must not have a fragment, got "https://example.com/#x"`},
		{"base_url empty query", func(c *Config) { c.BaseURL = "https://example.com/?" },
			`base_url: must not have a query, got "https://example.com/?"`},
		{"base_url unparsable", func(c *Config) { c.BaseURL = "http://[::1" },
			`base_url: "http://[::1" is not a URL: missing ']' in host`},
		{"upstream without host", func(c *Config) { c.Upstream = "http://" },
			`upstream: must be an absolute http or https URL like https://app.example.com, got "http://"`},
		{"upstream with path", func(c *Config) { c.Upstream = "http://app:3000/prefix" }, ""},
		{"driver empty", func(c *Config) { c.Database.Driver = "" },
			`database.driver: must be "sqlite", "postgres" or "none", got ""`},
		{"secret_env lowercase is fine", func(c *Config) { c.Auth.SecretEnv = "my_secret" }, ""},
		{"secret_env starts with a digit", func(c *Config) { c.Auth.SecretEnv = "1SECRET" },
			`auth.secret_env: must be an environment variable name like AUTH_SECRET, got "1SECRET"`},
		{"leeway zero", func(c *Config) { c.Auth.Leeway = 0 }, ""},
		{"session_update_age equal to ttl", func(c *Config) { c.Auth.SessionUpdateAge = c.Auth.SessionTTL },
			`auth.session_update_age: must be shorter than auth.session_ttl (168h), got 168h; otherwise sessions expire before they are extended`},
		{"session_update_age zero", func(c *Config) { c.Auth.SessionUpdateAge = 0 },
			`auth.session_update_age: must be positive, got 0s`},
		{"cookie prefix in any case", func(c *Config) { c.Auth.CookieName = "__host-session" },
			`auth.cookie_name: "__host-session" must not start with "__Host-": the "__Secure-" prefix is added automatically when base_url is https`},
		{"cookie name empty", func(c *Config) { c.Auth.CookieName = "" },
			"auth.cookie_name: \"\" is not a valid cookie name: use letters, digits and !#$%&'*+-.^_`|~ (RFC 6265)"},
		{"cookie name with =", func(c *Config) { c.Auth.CookieName = "a=b" },
			"auth.cookie_name: \"a=b\" is not a valid cookie name: use letters, digits and !#$%&'*+-.^_`|~ (RFC 6265)"},
		{"same_site none over https", func(c *Config) {
			c.BaseURL, c.Auth.CookieSameSite = "https://app.example.com", "none"
		}, ""},
		{"same_site strict", func(c *Config) { c.Auth.CookieSameSite = "strict" }, ""},
		{"require verification with mail off", func(c *Config) { c.Auth.RequireEmailVerification = true },
			`auth.require_email_verification: needs a way to send the verification mail, and email.delivery is "off": set it to "smtp", "webhook" or "log"`},
		{"require verification with log", func(c *Config) { c.Auth.RequireEmailVerification, c.Email.Delivery = true, "log" }, ""},
		{"ipv6_prefix 128", func(c *Config) { c.Limits.IPv6Prefix = 128 }, ""},
		{"ipv6_prefix 48", func(c *Config) { c.Limits.IPv6Prefix = 48 }, ""},
		{"ipv6_prefix too wide", func(c *Config) { c.Limits.IPv6Prefix = 16 },
			`limits.ipv6_prefix: must be between 32 and 128 (a prefix length; 64 groups each /64, 128 counts every address), got 16`},
		{"body_read_timeout too long", func(c *Config) { c.Limits.BodyReadTimeout = Duration(time.Hour) },
			`limits.body_read_timeout: must be between 1s and 5m, got 1h`},
		{"password_check_per_user off", func(c *Config) { c.Limits.PasswordCheckPerUser = Rate{} }, ""},
		{"password_check_per_ip negative", func(c *Config) { c.Limits.PasswordCheckPerIP = Rate{N: -1, Per: time.Minute} },
			`limits.password_check_per_ip: must not be negative (0 disables the limit), got -1`},
		{"reload_token_env", func(c *Config) { c.Metrics.ReloadTokenEnv = "RELOAD_TOKEN" }, ""},
		{"reload_token_env not a name", func(c *Config) { c.Metrics.ReloadTokenEnv = "$RELOAD_TOKEN" },
			`metrics.reload_token_env: must be an environment variable name like AUTH_SECRET, got "$RELOAD_TOKEN"`},
		{"send on sign-in without require", func(c *Config) { c.Auth.SendVerificationOnSignin, c.Email.Delivery = true, "log" },
			`auth.send_verification_on_signin: only acts when auth.require_email_verification is true (sign-in is refused to unverified users only then)`},
		{"reset ttl under a second", func(c *Config) { c.Auth.ResetTokenTTL = Duration(500 * time.Millisecond) },
			`auth.reset_token_ttl: must be at least 1s, got 500ms`},
		{"verification ttl 1s", func(c *Config) { c.Auth.VerificationTokenTTL = Duration(time.Second) }, ""},
		{"reset page path", func(c *Config) { c.Auth.ResetPageURL = "/account/reset" }, ""},
		{"reset page protocol-relative", func(c *Config) { c.Auth.ResetPageURL = "//evil.example/reset" },
			`auth.reset_page_url: want a path like /reset or an absolute URL: must be an absolute http or https URL like https://app.example.com, got "//evil.example/reset"`},
		{"delivery unknown", func(c *Config) { c.Email.Delivery = "sendmail" },
			`email.delivery: must be "off", "smtp", "webhook" or "log", got "sendmail"`},
		{"smtp without addr and from", func(c *Config) { c.Email.Delivery = "smtp" },
			`email.from: is required for delivery "smtp": the sender, like "Example <no-reply@example.com>"` + "\n" +
				`email.smtp.addr: is required for delivery "smtp": the mail server's host:port, like smtp.example.com:587`},
		{"smtp good", func(c *Config) {
			c.Email.Delivery, c.Email.From, c.Email.SMTP.Addr = "smtp", "Example <no-reply@example.com>", "smtp.example.com:587"
		}, ""},
		{"smtp tls none to a remote host", func(c *Config) {
			c.Email.Delivery, c.Email.From, c.Email.SMTP.Addr, c.Email.SMTP.TLS = "smtp", "a@example.com", "smtp.example.com:25", "none"
		}, `email.smtp.tls: "none" is only allowed to a loopback address (mails carry working links): use "starttls" or "implicit" for smtp.example.com:25`},
		{"smtp tls none to loopback", func(c *Config) {
			c.Email.Delivery, c.Email.From, c.Email.SMTP.Addr, c.Email.SMTP.TLS = "smtp", "a@example.com", "127.0.0.1:2525", "none"
		}, ""},
		{"smtp from with a newline", func(c *Config) {
			c.Email.Delivery, c.Email.From, c.Email.SMTP.Addr = "smtp", "a@example.com\nBcc: b@example.com", "smtp.example.com:587"
		}, `email.from: must be one line`},
		{"webhook over http to a remote host", func(c *Config) {
			c.Email.Delivery, c.Email.Webhook.URL = "webhook", "http://app.example.com/hook"
		}, `email.webhook.url: "http://app.example.com/hook": plain http is only allowed to a loopback address (the body holds a working reset link); use https`},
		{"webhook over http to loopback", func(c *Config) { c.Email.Delivery, c.Email.Webhook.URL = "webhook", "http://127.0.0.1:3000/hook" }, ""},
		{"webhook timeout past the attempt bound", func(c *Config) {
			c.Email.Delivery, c.Email.Webhook.URL, c.Email.Webhook.Timeout = "webhook", "https://app.example.com/hook", Duration(time.Minute)
		}, `email.webhook.timeout: must be at most 30s (one delivery attempt's bound), got 1m`},
		{"max attempts zero", func(c *Config) { c.Email.MaxAttempts = 0 }, `email.max_attempts: must be between 1 and 100, got 0`},
		{"mail in verifier mode", func(c *Config) {
			c.Mode, c.Database.Driver, c.Keys.JWKSURL, c.Email.Delivery = "verifier", "none", "https://auth.example.com/api/auth/jwks", "log"
			c.Routes.CookieOnly, c.Routes.Admin = nil, nil
		}, `email.delivery: must be "off" in mode verifier, which serves no /api/auth/*`},
		{"mail limit negative", func(c *Config) { c.Limits.MailPerEmail = Rate{N: -1, Per: time.Hour} },
			`limits.mail_per_email: must not be negative (0 disables the limit), got -1`},

		{"password lengths equal", func(c *Config) { c.Auth.MinPasswordLength, c.Auth.MaxPasswordLength = 12, 12 }, ""},
		{"password lengths at bounds", func(c *Config) { c.Auth.MinPasswordLength, c.Auth.MaxPasswordLength = 1, 1024 }, ""},
		{"good trusted origins", func(c *Config) {
			c.Auth.TrustedOrigins = []string{"https://a.example.com", "http://localhost:5173", "http://127.0.0.1:3000", "http://[::1]:5173", "https://xn--bcher-kva.example"}
		}, ""},
		{"trusted origin with empty port", func(c *Config) { c.Auth.TrustedOrigins = []string{"https://a.example.com:"} },
			`auth.trusted_origins[0]: "https://a.example.com:": drop the empty port after the colon`},
		{"trusted origin unicode host", func(c *Config) { c.Auth.TrustedOrigins = []string{"https://bücher.example"} },
			`auth.trusted_origins[0]: "https://bücher.example": host must be ASCII; write an internationalized name in punycode (xn--...), as browsers send it`},
		{"trusted origin null", func(c *Config) { c.Auth.TrustedOrigins = []string{"null"} },
			`auth.trusted_origins[0]: "null": want an origin like https://app.example.com (http or https, lowercase)`},
		{"trusted origin uppercase scheme", func(c *Config) { c.Auth.TrustedOrigins = []string{"HTTPS://a.example.com"} },
			`auth.trusted_origins[0]: "HTTPS://a.example.com": want an origin like https://app.example.com (http or https, lowercase)`},
		{"trusted origin fragment", func(c *Config) { c.Auth.TrustedOrigins = []string{"https://a.example.com#x"} },
			`auth.trusted_origins[0]: "https://a.example.com#x": must not have a fragment`},
		{"identity header in other case", func(c *Config) { c.Routes.IdentityHeader = "x-forwarded-for" },
			`routes.identity_header: "x-forwarded-for" is a header the proxy itself relies on; pick a dedicated name such as X-User-Id`},
		{"empty route lists", func(c *Config) {
			c.Routes.CookieOnly, c.Routes.Passthrough, c.Routes.WebsocketPrefixes, c.Routes.Admin = nil, nil, nil, nil
		}, ""},
		{"route with control byte", func(c *Config) { c.Routes.Passthrough = []string{"/ws/\x00"} },
			`routes.passthrough[0]: "/ws/\x00" must not contain whitespace or control characters`},
		{"route with fragment", func(c *Config) { c.Routes.Passthrough = []string{"/ws/#x"} },
			`routes.passthrough[0]: "/ws/#x" must not contain "?" or "#": routes match the path only`},
		{"route non-ASCII", func(c *Config) { c.Routes.CookieOnly = []string{"/café"} },
			`routes.cookie_only[0]: "/café" must be lowercase ASCII`},
		{"admin prefix exactly /api/", func(c *Config) { c.Routes.Admin[0].Prefix = "/api/" }, ""},
		{"admin prefix /api without slash", func(c *Config) { c.Routes.Admin[0].Prefix = "/api" },
			`routes.admin[0].prefix: "/api" must be under "/api/", where role checks apply`},
		{"admin prefix empty", func(c *Config) { c.Routes.Admin[0].Prefix = "" },
			`routes.admin[0].prefix: must not be empty`},
		{"admin prefix duplicate", func(c *Config) {
			c.Routes.Admin = append(c.Routes.Admin, AdminRoute{Prefix: "/api/admin/", Roles: []string{"ops"}})
		}, `routes.admin[1].prefix: "/api/admin/" is a duplicate of routes.admin[0].prefix`},
		{"admin roles nil", func(c *Config) { c.Routes.Admin[0].Roles = nil },
			`routes.admin[0].roles: must list at least one role`},
		{"admin role empty", func(c *Config) { c.Routes.Admin[0].Roles = []string{""} },
			`routes.admin[0].roles[0]: "" is not a role name: use lowercase letters, digits, _ and -`},
		{"cors max_age zero", func(c *Config) { c.CORS.MaxAge = 0 }, ""},
		{"good trusted proxies", func(c *Config) {
			c.Proxy.TrustedProxies = []string{"10.0.0.0/8", "192.0.2.1", "::1", "2001:db8::/32", "0.0.0.0/0"}
		}, ""},
		{"trusted proxy IPv6 host bits", func(c *Config) { c.Proxy.TrustedProxies = []string{"2001:db8::1/32"} },
			`proxy.trusted_proxies[0]: "2001:db8::1/32" has host bits set; did you mean 2001:db8::/32?`},
		{"trusted proxy hostname", func(c *Config) { c.Proxy.TrustedProxies = []string{"lb.internal"} },
			`proxy.trusted_proxies[0]: "lb.internal" is not an IP or CIDR (e.g. 10.0.0.0/8 or 192.0.2.1)`},
		{"good allowed hosts", func(c *Config) {
			c.Proxy.AllowedHosts = []string{"example.com", "Example.COM:8443", "localhost", "192.0.2.1:80", "[::1]", "[2001:db8::1]:8080"}
		}, ""},
		{"allowed host bare IPv6", func(c *Config) { c.Proxy.AllowedHosts = []string{"2001:db8::1"} },
			`proxy.allowed_hosts[0]: "2001:db8::1": want host or host:port with a port from 1 to 65535 (IPv6 addresses in brackets)`},
		{"allowed host bracketed IPv4", func(c *Config) { c.Proxy.AllowedHosts = []string{"[192.0.2.1]"} },
			`proxy.allowed_hosts[0]: "[192.0.2.1]": want an IPv6 address in brackets, like [2001:db8::1]:8080`},
		{"allowed host wildcard", func(c *Config) { c.Proxy.AllowedHosts = []string{"*.example.com"} },
			`proxy.allowed_hosts[0]: "*.example.com": wildcards are not supported; list each host`},
		{"allowed host underscore", func(c *Config) { c.Proxy.AllowedHosts = []string{"my_host"} },
			`proxy.allowed_hosts[0]: "my_host" is not a valid host name`},
		{"allowed host port 0", func(c *Config) { c.Proxy.AllowedHosts = []string{"example.com:0"} },
			`proxy.allowed_hosts[0]: "example.com:0": want host or host:port with a port from 1 to 65535 (IPv6 addresses in brackets)`},
		{"allowed host empty", func(c *Config) { c.Proxy.AllowedHosts = []string{""} },
			`proxy.allowed_hosts[0]: must not be empty`},
		{"body bytes at bounds", func(c *Config) { c.Limits.BodyBytes = 16 << 20 }, ""},
		{"rates off", func(c *Config) { c.Limits.SigninPerEmail, c.Limits.SigninPerIP = Rate{}, Rate{} }, ""},
		{"rate negative", func(c *Config) { c.Limits.SignupPerIP = Rate{N: -1, Per: time.Minute} },
			`limits.signup_per_ip: must not be negative (0 disables the limit), got -1`},
		{"rate without window", func(c *Config) { c.Limits.SigninPerIP = Rate{N: 5} },
			`limits.signin_per_ip: window must be positive, got 0s`},
		{"cache off", func(c *Config) { c.Cache.VerifiedTokens = 0 }, ""},
		{"sweep every second", func(c *Config) { c.Sweep.Interval = Duration(time.Second) }, ""},
		{"sweep more often", func(c *Config) { c.Sweep.Interval = Duration(999 * time.Millisecond) }, "sweep.interval: must be at least 1s, got 999ms"},
		{"two problems, both reported", func(c *Config) { c.Log.Format, c.Shutdown.Grace = "", -1 },
			"log.format: must be \"json\" or \"text\", got \"\"\nshutdown.grace: must be positive, got -1ns"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			tt.mutate(&c)
			got := ""
			if err := c.Validate(); err != nil {
				got = err.Error()
			}
			if got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// TestValidateReportsEveryProblem: the zero Config is wrong in many places,
// and each must be reported at once.
func TestValidateReportsEveryProblem(t *testing.T) {
	err := Config{}.Validate()
	if err == nil {
		t.Fatal("got nil, want errors for the zero Config")
	}
	var got []string
	for _, line := range strings.Split(err.Error(), "\n") {
		path, _, _ := strings.Cut(line, ": ")
		got = append(got, path)
	}
	want := []string{
		"mode", "listen", "base_url", "upstream", "database.driver",
		"auth.secret_env", "auth.jwt_ttl", "auth.session_ttl", "auth.session_update_age",
		"auth.cookie_name", "auth.cookie_same_site", "auth.min_password_length",
		"auth.reset_token_ttl", "auth.verification_token_ttl",
		"keys.max_age", "keys.cooldown", "keys.stale_if_error",
		"keys.revocations_stale_if_error", "keys.revocations_url", "routes.identity_header",
		"proxy.response_header_timeout", "proxy.upstream_max_conns", "proxy.upstream_max_pending",
		"proxy.upstream_client_share", "proxy.body_rate_grace",
		"limits.body_bytes", "limits.ipv6_prefix", "limits.body_read_timeout",
		"email.delivery", "email.max_attempts", "revocation.poll_interval", "sweep.interval", "metrics.listen",
		"log.format", "log.level", "shutdown.grace",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got paths\n%q\nwant\n%q\nfull error:\n%v", got, want, err)
	}
}

func TestValidateDoesNotModify(t *testing.T) {
	c := Default()
	c.Auth.TrustedOrigins = []string{"https://a.example.com", "https://a.example.com"}
	before := Default()
	before.Auth.TrustedOrigins = []string{"https://a.example.com", "https://a.example.com"}
	_ = c.Validate()
	if !reflect.DeepEqual(c, before) {
		t.Errorf("got %+v after Validate, want it unchanged %+v", c, before)
	}
}
