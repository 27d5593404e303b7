package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// badFiles pins the exact error for each testdata/bad-*.yaml: one file per
// rule, so a change to a message or a line is a visible diff here.
var badFiles = map[string]string{
	// Decoding.
	"bad-unknown-key.yaml":       `bad-unknown-key.yaml:3: auth.jwt_tll: unknown key (did you mean jwt_ttl?)`,
	"bad-unknown-key-top.yaml":   `bad-unknown-key-top.yaml:2: upstreams: unknown key (did you mean upstream?)`,
	"bad-unknown-key-admin.yaml": "bad-unknown-key-admin.yaml:3: routes.admin[0].roles: must list at least one role\nbad-unknown-key-admin.yaml:4: routes.admin[0].role: unknown key (did you mean roles?)",
	"bad-duplicate-key.yaml":     `bad-duplicate-key.yaml:4: log.level: duplicate key (first set at line 2)`,
	"bad-two-documents.yaml":     `bad-two-documents.yaml:2: a second YAML document starts here; the config file must hold exactly one`,
	"bad-syntax.yaml":            `bad-syntax.yaml:3: did not find expected ',' or ']'`,
	"bad-indent.yaml":            `bad-indent.yaml:3: did not find expected key`,
	"bad-tab.yaml":               `bad-tab.yaml:2: found character that cannot start any token`,
	"bad-not-mapping.yaml":       `bad-not-mapping.yaml:1: want a mapping, got a list`,
	"bad-type-section.yaml":      `bad-type-section.yaml:1: auth: want a mapping, got "strict"`,
	"bad-type-int.yaml":          `bad-type-int.yaml:2: limits.body_bytes: want a whole number, got "64KiB"`,
	"bad-type-float.yaml":        `bad-type-float.yaml:2: auth.min_password_length: want a whole number, got 8.5`,
	"bad-type-bool.yaml":         `bad-type-bool.yaml:2: cors.allow_credentials: want true or false, got "sometimes"`,
	"bad-type-list.yaml":         `bad-type-list.yaml:2: routes.passthrough: want a list of strings, got "/ws/browser"`,
	"bad-empty-value.yaml":       `bad-empty-value.yaml:3: auth.jwt_ttl: empty value: set one, or delete the key to keep the default (720h)`,
	"bad-duration-bare.yaml":     `bad-duration-bare.yaml:2: auth.jwt_ttl: invalid duration "30": a bare number has no unit; write it with one, like 30s, 30m or 30h`,
	"bad-duration-days.yaml":     `bad-duration-days.yaml:2: auth.jwt_ttl: invalid duration "30d": there is no day unit; write 720h for 30 days`,
	"bad-duration-word.yaml":     `bad-duration-word.yaml:2: shutdown.grace: invalid duration "soon": want a number with a unit, like 30s, 10m or 720h`,
	"bad-rate.yaml":              `bad-rate.yaml:2: limits.signin_per_ip: invalid rate "20/d": want N/s, N/m or N/h (e.g. 5/m), or off`,
	"bad-rate-zero.yaml":         `bad-rate-zero.yaml:2: limits.signup_per_ip: invalid rate "0/m": N must be positive; write off to disable the limit`,
	"bad-ipv6-prefix.yaml":       `bad-ipv6-prefix.yaml:2: limits.ipv6_prefix: must be between 32 and 128 (a prefix length; 64 groups each /64, 128 counts every address), got 16`,
	"bad-body-read-timeout.yaml": `bad-body-read-timeout.yaml:2: limits.body_read_timeout: must be between 1s and 5m, got 0s`,
	"bad-reload-token-env.yaml":  `bad-reload-token-env.yaml:2: metrics.reload_token_env: must be an environment variable name like AUTH_SECRET, got "reload token"`,

	// Addresses and URLs.
	"bad-listen.yaml":              `bad-listen.yaml:2: listen: "localhost" is not host:port (e.g. 127.0.0.1:8080): missing port in address`,
	"bad-listen-port.yaml":         `bad-listen-port.yaml:2: listen: "127.0.0.1:http": port must be a number from 0 to 65535`,
	"bad-metrics-listen.yaml":      `bad-metrics-listen.yaml:2: metrics.listen: "127.0.0.1" is not host:port (e.g. 127.0.0.1:8080): missing port in address`,
	"bad-metrics-listen-same.yaml": `bad-metrics-listen-same.yaml:3: metrics.listen: must differ from listen (both are "0.0.0.0:8080")`,
	"bad-base-url.yaml":            `bad-base-url.yaml:2: base_url: must be an absolute http or https URL like https://app.example.com, got "app.example.com"`,
	"bad-base-url-query.yaml":      `bad-base-url-query.yaml:1: base_url: must not have a query, got "https://app.example.com/?x=1"`,
	"bad-base-url-userinfo.yaml":   `bad-base-url-userinfo.yaml:1: base_url: must not contain userinfo (user@ or user:password@), got "https://user:pw@app.example.com"`,
	"bad-upstream.yaml":            `bad-upstream.yaml:1: upstream: must be an absolute http or https URL like https://app.example.com, got "ftp://127.0.0.1:3000"`,

	// database
	"bad-database-driver.yaml":        `bad-database-driver.yaml:2: database.driver: must be "sqlite", "postgres" or "none", got "mysql"`,
	"bad-database-path-postgres.yaml": `bad-database-path-postgres.yaml:3: database.path: is only for database.driver "sqlite", and the driver is "postgres"`,
	"bad-database-url-env-sqlite.yaml": "bad-database-url-env-sqlite.yaml:3: database.url_env: is only for database.driver \"postgres\", and the driver is \"sqlite\"\n" +
		"bad-database-url-env-sqlite.yaml:4: database.max_conns: is only for database.driver \"postgres\", and the driver is \"sqlite\"",
	"bad-database-postgres-keys.yaml": "bad-database-postgres-keys.yaml:3: database.url_env: must be an environment variable name like AUTH_SECRET, got \"postgres://x\"\n" +
		"bad-database-postgres-keys.yaml:4: database.max_conns: must be between 1 and 1000, got 0",
	"bad-database-none-full.yaml": `bad-database-none-full.yaml:2: database.driver: "none" is only for mode verifier: a full sidecar stores users, sessions and keys`,

	// Modes.
	"bad-mode.yaml":                 `bad-mode.yaml:1: mode: must be "full" or "verifier", got "standalone"`,
	"bad-verifier-no-jwks-url.yaml": `bad-verifier-no-jwks-url.yaml:1: keys.jwks_url: is required in mode verifier: the issuer's /api/auth/jwks, like https://auth.example.com/api/auth/jwks`,
	"bad-jwks-url-full.yaml":        `bad-jwks-url-full.yaml:2: keys.jwks_url: is only for mode verifier: a full sidecar verifies with the keys in its own database`,
	"bad-jwks-ca-file.yaml":         `bad-jwks-ca-file.yaml:2: keys.jwks_ca_file: is only used with keys.jwks_url, which is not set`,
	"bad-verifier-routes-no-db.yaml": "bad-verifier-routes-no-db.yaml:5: routes.cookie_only: needs a database to look sessions up, and database.driver is \"none\": remove the routes or use the issuers' postgres database\n" +
		"bad-verifier-routes-no-db.yaml:7: routes.admin: needs a database to read user_role, and database.driver is \"none\": remove the routes, write routes.admin: [] if the upstream checks roles itself, or use the issuers' postgres database",
	"bad-verifier-sqlite.yaml": "bad-verifier-sqlite.yaml:3: database.driver: \"sqlite\" cannot be shared with the issuers a verifier trusts: want \"none\" or \"postgres\"\n" +
		"bad-verifier-sqlite.yaml:5: keys.jwks_url: must be an absolute http or https URL like https://app.example.com, got \"ftp://auth.example.com/jwks\"",
	"bad-auth-issuer.yaml":   `bad-auth-issuer.yaml:2: auth.issuer: must be printable ASCII without spaces, like https://auth.example.com, got "https://auth example.com"`,
	"bad-database-path.yaml": `bad-database-path.yaml:2: database.path: must not be empty`,

	// auth
	"bad-secret-env.yaml":                    `bad-secret-env.yaml:2: auth.secret_env: must be an environment variable name like AUTH_SECRET, got "AUTH SECRET"`,
	"bad-jwt-ttl.yaml":                       `bad-jwt-ttl.yaml:2: auth.jwt_ttl: must be positive, got -1h`,
	"bad-leeway.yaml":                        `bad-leeway.yaml:2: auth.leeway: must not be negative, got -5s`,
	"bad-session-ttl.yaml":                   `bad-session-ttl.yaml:2: auth.session_ttl: must be positive, got 0s`,
	"bad-session-update-age.yaml":            `bad-session-update-age.yaml:3: auth.session_update_age: must be shorter than auth.session_ttl (12h), got 24h; otherwise sessions expire before they are extended`,
	"bad-session-update-age-default.yaml":    `bad-session-update-age-default.yaml:3: auth.session_update_age: must be shorter than auth.session_ttl (1h), got 24h; otherwise sessions expire before they are extended`,
	"bad-cookie-name.yaml":                   "bad-cookie-name.yaml:2: auth.cookie_name: \"session token\" is not a valid cookie name: use letters, digits and !#$%&'*+-.^_`|~ (RFC 6265)",
	"bad-cookie-name-prefix.yaml":            `bad-cookie-name-prefix.yaml:2: auth.cookie_name: "__Secure-session" must not start with "__Secure-": the "__Secure-" prefix is added automatically when base_url is https`,
	"bad-cookie-same-site.yaml":              `bad-cookie-same-site.yaml:2: auth.cookie_same_site: must be "lax", "strict" or "none", got "Lax"`,
	"bad-require-verification-mail-off.yaml": `bad-require-verification-mail-off.yaml:3: auth.require_email_verification: needs a way to send the verification mail, and email.delivery is "off": set it to "smtp", "webhook" or "log"`,
	"bad-smtp-tls-none-remote.yaml":          `bad-smtp-tls-none-remote.yaml:7: email.smtp.tls: "none" is only allowed to a loopback address (mails carry working links): use "starttls" or "implicit" for smtp.example.com:25`,
	"bad-cookie-same-site-none.yaml":         `bad-cookie-same-site-none.yaml:4: auth.cookie_same_site: "none" requires an https base_url: browsers drop SameSite=None cookies that are not Secure`,
	"bad-min-password-length.yaml":           `bad-min-password-length.yaml:2: auth.min_password_length: must be at least 1, got 0`,
	"bad-password-length-order.yaml":         `bad-password-length-order.yaml:2: auth.min_password_length: must not exceed auth.max_password_length (32), got 64`,
	"bad-max-password-length.yaml":           `bad-max-password-length.yaml:2: auth.max_password_length: must be at most 1024, got 4096`,
	"bad-trusted-origin-slash.yaml":          `bad-trusted-origin-slash.yaml:3: auth.trusted_origins[0]: "https://app.example.com/": must not end with a slash (an Origin header never does)`,
	"bad-trusted-origin-path.yaml":           `bad-trusted-origin-path.yaml:3: auth.trusted_origins[0]: "https://app.example.com/login": must not have a path (an origin is scheme://host[:port])`,
	"bad-trusted-origin-scheme.yaml":         `bad-trusted-origin-scheme.yaml:3: auth.trusted_origins[0]: "app.example.com": want an origin like https://app.example.com (http or https, lowercase)`,
	"bad-trusted-origin-query.yaml":          `bad-trusted-origin-query.yaml:3: auth.trusted_origins[0]: "https://app.example.com?x=1": must not have a query`,
	"bad-trusted-origin-userinfo.yaml":       `bad-trusted-origin-userinfo.yaml:3: auth.trusted_origins[0]: "https://user@app.example.com": must not contain userinfo`,
	"bad-trusted-origin-default-port.yaml":   `bad-trusted-origin-default-port.yaml:3: auth.trusted_origins[0]: "https://app.example.com:443": drop the default port :443 (browsers omit it from the Origin header)`,
	"bad-trusted-origin-uppercase.yaml":      `bad-trusted-origin-uppercase.yaml:3: auth.trusted_origins[0]: "https://App.Example.com": host must be lowercase (browsers lowercase it in the Origin header)`,
	"bad-trusted-origin-wildcard.yaml":       `bad-trusted-origin-wildcard.yaml:3: auth.trusted_origins[0]: "https://*.example.com": wildcards are not supported; list each origin`,
	"bad-trusted-origin-duplicate.yaml":      `bad-trusted-origin-duplicate.yaml:5: auth.trusted_origins[2]: "https://app.example.com" is a duplicate of auth.trusted_origins[0]`,

	// keys
	"bad-keys-max-age.yaml":             `bad-keys-max-age.yaml:2: keys.max_age: must be positive, got 0s`,
	"bad-keys-cooldown.yaml":            `bad-keys-cooldown.yaml:2: keys.cooldown: must be positive, got -30s`,
	"bad-revocation-poll-interval.yaml": `bad-revocation-poll-interval.yaml:2: revocation.poll_interval: must be between 100ms and 1m, got 50ms`,
	"bad-revocations-url-full.yaml":     `bad-revocations-url-full.yaml:2: keys.revocations_url: is only for mode verifier (leave it "auto"): a full sidecar reads revocations from its own database`,
	"bad-revocations-url.yaml":          `bad-revocations-url.yaml:4: keys.revocations_url: must be an absolute http or https URL like https://app.example.com, got "auth.example.com/revocations"`,
	"bad-revocations-stale.yaml":        `bad-revocations-stale.yaml:4: keys.revocations_stale_if_error: must be positive, got 0s`,
	"bad-sweep-interval.yaml":           `bad-sweep-interval.yaml:3: sweep.interval: must be at least 1s, got 500ms`,

	// routes
	"bad-identity-header.yaml":          `bad-identity-header.yaml:2: routes.identity_header: "X-User Id" is not a valid header name: use letters, digits and !#$%&'*+-.^_` + "`" + `|~ (RFC 9110)`,
	"bad-identity-header-reserved.yaml": `bad-identity-header-reserved.yaml:2: routes.identity_header: "authorization" is a header the proxy itself relies on; pick a dedicated name such as X-User-Id`,
	"bad-route-relative.yaml":           `bad-route-relative.yaml:3: routes.cookie_only[0]: "api/mcp-oauth/authorize" must start with "/"`,
	"bad-route-dotdot.yaml":             `bad-route-dotdot.yaml:3: routes.passthrough[0]: "/ws/../api/" must not contain ".."`,
	"bad-route-double-slash.yaml":       `bad-route-double-slash.yaml:3: routes.passthrough[0]: "/ws//browser" must not contain "//"`,
	"bad-route-query.yaml":              `bad-route-query.yaml:3: routes.cookie_only[0]: "/api/mcp-oauth/authorize?client=x" must not contain "?" or "#": routes match the path only`,
	"bad-route-uppercase.yaml":          `bad-route-uppercase.yaml:3: routes.websocket_prefixes[0]: "/WS/" must be lowercase ASCII`,
	"bad-route-whitespace.yaml":         `bad-route-whitespace.yaml:3: routes.passthrough[0]: "/ws/browser " must not contain whitespace or control characters`,
	"bad-route-empty.yaml":              `bad-route-empty.yaml:3: routes.passthrough[0]: must not be empty`,
	"bad-route-duplicate.yaml":          `bad-route-duplicate.yaml:4: routes.websocket_prefixes[1]: "/ws/" is a duplicate of routes.websocket_prefixes[0]`,
	"bad-admin-prefix.yaml":             `bad-admin-prefix.yaml:3: routes.admin[0].prefix: "/admin/" must be under "/api/", where role checks apply`,
	"bad-admin-roles.yaml":              `bad-admin-roles.yaml:4: routes.admin[0].roles: must list at least one role`,
	"bad-admin-role-name.yaml":          `bad-admin-role-name.yaml:4: routes.admin[0].roles[1]: "Support" is not a role name: use lowercase letters, digits, _ and -`,

	// cors, proxy
	"bad-cors-max-age.yaml":               `bad-cors-max-age.yaml:2: cors.max_age: must not be negative, got -1m`,
	"bad-response-header-timeout.yaml":    `bad-response-header-timeout.yaml:2: proxy.response_header_timeout: must be positive, got 0s`,
	"bad-upstream-max-conns.yaml":         `bad-upstream-max-conns.yaml:2: proxy.upstream_max_conns: must be between 1 and 65536, got 0`,
	"bad-upstream-max-pending.yaml":       `bad-upstream-max-pending.yaml:3: proxy.upstream_max_pending: must be between 1 and 1048576, got 2000000`,
	"bad-trusted-proxies.yaml":            `bad-trusted-proxies.yaml:4: proxy.trusted_proxies[1]: "10.0.0.300" is not an IP or CIDR (e.g. 10.0.0.0/8 or 192.0.2.1)`,
	"bad-trusted-proxies-host-bits.yaml":  `bad-trusted-proxies-host-bits.yaml:3: proxy.trusted_proxies[0]: "10.1.2.3/8" has host bits set; did you mean 10.0.0.0/8?`,
	"bad-allowed-hosts.yaml":              `bad-allowed-hosts.yaml:3: proxy.allowed_hosts[0]: "https://app.example.com" must be a host name, optionally with :port, not a URL`,
	"bad-strip-headers.yaml":              `bad-strip-headers.yaml:4: proxy.strip_headers[1]: "Authorization" cannot be stripped: requests need it`,
	"bad-upstream-client-share.yaml":      `bad-upstream-client-share.yaml:2: proxy.upstream_client_share: must be between 1% and 100%, got 0%`,
	"bad-upstream-client-share-form.yaml": `bad-upstream-client-share-form.yaml:2: proxy.upstream_client_share: want a percentage like 25%, got 0.25`,
	"bad-body-min-rate.yaml":              `bad-body-min-rate.yaml:2: proxy.body_min_rate: invalid byte rate "1KB/s": want N/s with a unit of B, KiB or MiB (e.g. 1KiB/s), or off`,
	"bad-body-min-rate-zero.yaml":         `bad-body-min-rate-zero.yaml:2: proxy.body_min_rate: invalid byte rate "0KiB/s": N must be positive; write off for no rate`,
	"bad-body-rate-grace.yaml":            `bad-body-rate-grace.yaml:2: proxy.body_rate_grace: must be between 1s and 5m, got 500ms`,
	"bad-body-buffer.yaml":                `bad-body-buffer.yaml:2: proxy.body_buffer: must be between 0 (every body streams) and 16777216 (16 MiB), got 33554432`,
	"bad-allowed-hosts-port.yaml":         `bad-allowed-hosts-port.yaml:3: proxy.allowed_hosts[0]: "app.example.com:https": want host or host:port with a port from 1 to 65535 (IPv6 addresses in brackets)`,

	// limits, log, shutdown, cache
	"bad-body-bytes-small.yaml":          `bad-body-bytes-small.yaml:2: limits.body_bytes: must be between 1024 (1 KiB) and 16777216 (16 MiB), got 512`,
	"bad-body-bytes-large.yaml":          `bad-body-bytes-large.yaml:2: limits.body_bytes: must be between 1024 (1 KiB) and 16777216 (16 MiB), got 1073741824`,
	"bad-password-hash-concurrency.yaml": `bad-password-hash-concurrency.yaml:2: limits.password_hash_concurrency: must not be negative (0 means GOMAXPROCS), got -1`,
	"bad-log-format.yaml":                `bad-log-format.yaml:2: log.format: must be "json" or "text", got "logfmt"`,
	"bad-log-level.yaml":                 `bad-log-level.yaml:2: log.level: must be "debug", "info", "warn" or "error", got "verbose"`,
	"bad-shutdown-grace.yaml":            `bad-shutdown-grace.yaml:2: shutdown.grace: must be positive, got 0s`,
	"bad-cache-verified-tokens.yaml":     `bad-cache-verified-tokens.yaml:2: cache.verified_tokens: must not be negative (0 disables the cache), got -1`,

	// Several problems in one file: all reported, in line order, decoding
	// and validation problems together.
	// identity_providers
	"bad-idp-duplicate-id.yaml": `bad-idp-duplicate-id.yaml:6: identity_providers[1].id: "google" is a duplicate of identity_providers[0].id`,
	"bad-idp-http-issuer.yaml": strings.Join([]string{
		`bad-idp-http-issuer.yaml:5: identity_providers[0].issuer: "http://idp.example.com": plain http is only allowed to a loopback address (codes, tokens and the client secret travel here); use https`,
		`bad-idp-http-issuer.yaml:8: identity_providers[0].endpoints.token: "http://10.0.0.5/token": plain http is only allowed to a loopback address (codes, tokens and the client secret travel here); use https`,
	}, "\n"),
	"bad-idp-id.yaml": strings.Join([]string{
		`bad-idp-id.yaml:2: identity_providers[0].id: "Corp IdP": want lowercase letters, digits, - and _, at most 64 bytes`,
		`bad-idp-id.yaml:6: identity_providers[1].id: "credential" is the password account's provider id; choose another`,
		`bad-idp-id.yaml:10: identity_providers[2].id: is required: the name on the wire, like corp (callback /api/auth/callback/corp)`,
	}, "\n"),
	"bad-idp-inline-secret.yaml": `bad-idp-inline-secret.yaml:7: identity_providers[0].client_secret: unknown key`,
	"bad-idp-kind-options.yaml": strings.Join([]string{
		`bad-idp-kind-options.yaml:4: identity_providers[0].issuer: is not used by kind github (it has no OpenID issuer): remove it, or set endpoints for GitHub Enterprise`,
		`bad-idp-kind-options.yaml:7: identity_providers[0].required_claims: is only for kinds oidc and google: GitHub has no id token (use allowed_organizations)`,
		`bad-idp-kind-options.yaml:10: identity_providers[0].endpoints.jwks: is not used by kind github`,
		`bad-idp-kind-options.yaml:11: identity_providers[0].trust_unverified_email: is only for kind oidc: github always says whether an address is verified, and an unverified one must not sign in`,
		`bad-idp-kind-options.yaml:16: identity_providers[1].allowed_organizations: is only for kind github (use required_claims with your provider's groups claim)`,
		`bad-idp-kind-options.yaml:18: identity_providers[1].endpoints.api: is not used by kind oidc`,
	}, "\n"),
	"bad-idp-kind.yaml":           `bad-idp-kind.yaml:3: identity_providers[0].kind: must be "oidc", "google" or "github", got "saml"`,
	"bad-idp-oidc-no-issuer.yaml": `bad-idp-oidc-no-issuer.yaml:3: identity_providers[0].issuer: is required for kind oidc: the provider's issuer URL, like https://idp.example.com (discovery at <issuer>/.well-known/openid-configuration)`,
	"bad-idp-rules.yaml": strings.Join([]string{
		`bad-idp-rules.yaml:6: identity_providers[0].scopes[0]: "openid email" is not one scope: no spaces, quotes or backslashes`,
		`bad-idp-rules.yaml:7: identity_providers[0].allowed_email_domains[0]: "@example.com": want a domain like example.com, without the @`,
		`bad-idp-rules.yaml:7: identity_providers[0].allowed_email_domains[2]: "example.com" is a duplicate of identity_providers[0].allowed_email_domains[1]`,
		`bad-idp-rules.yaml:8: identity_providers[0].required_claims.groups: must list at least one value`,
		`bad-idp-rules.yaml:14: identity_providers[1].allowed_organizations[0]: "acme inc" is not a GitHub organization login`,
	}, "\n"),
	"bad-idp-secret-env.yaml": strings.Join([]string{
		`bad-idp-secret-env.yaml:2: identity_providers[0].client_secret_env: is required for kind google: the environment variable holding the client secret`,
		`bad-idp-secret-env.yaml:9: identity_providers[1].client_secret_env: must be an environment variable name like AUTH_SECRET, got "CORP-SECRET"`,
	}, "\n"),
	"bad-idp-types.yaml": strings.Join([]string{
		`bad-idp-types.yaml:6: identity_providers[0].sign_up: want true or false, got "maybe"`,
		`bad-idp-types.yaml:8: identity_providers[0].required_claims: want a value or a list of values, got a mapping`,
	}, "\n"),
	"bad-idp-verifier.yaml": `bad-idp-verifier.yaml:4: identity_providers: is only for mode full: a verifier serves no /api/auth/*`,

	// migration
	"bad-legacy-signin.yaml": strings.Join([]string{
		`bad-legacy-signin.yaml:4: migration.legacy_signin.url: "http://legacy.example.com/api/signin": plain http is only allowed to a loopback address (passwords travel here); use https`,
		`bad-legacy-signin.yaml:5: migration.legacy_signin.secret_env: must be an environment variable name like AUTH_SECRET, got "LEGACY-SECRET"`,
		`bad-legacy-signin.yaml:6: migration.legacy_signin.timeout: must be between 100ms and 4s (a sign-in is answered within 5s), got 10s`,
	}, "\n"),
	"bad-legacy-signin-verifier.yaml": `bad-legacy-signin-verifier.yaml:6: migration.legacy_signin.url: is only for mode full: a verifier serves no /api/auth/*`,
	"bad-better-auth.yaml": strings.Join([]string{
		`bad-better-auth.yaml:2: auth.better_auth_secret_env: must be an environment variable name like AUTH_SECRET, got "better-auth-secret"`,
		`bad-better-auth.yaml:3: auth.better_auth_cookie: "__Secure-better-auth.session_token" must not start with "__Secure-": the "__Secure-" prefix is added automatically when base_url is https`,
	}, "\n"),

	"bad-several.yaml": strings.Join([]string{
		`bad-several.yaml:2: listen: "localhost" is not host:port (e.g. 127.0.0.1:8080): missing port in address`,
		`bad-several.yaml:4: auth.jwt_ttl: must be positive, got -1h`,
		`bad-several.yaml:5: auth.cookie_same_site: must be "lax", "strict" or "none", got "LAX"`,
		`bad-several.yaml:6: auth.jwt_tll: unknown key (did you mean jwt_ttl?)`,
		`bad-several.yaml:9: routes.admin[0].prefix: "/admin/" must be under "/api/", where role checks apply`,
		`bad-several.yaml:10: routes.admin[0].roles: must list at least one role`,
		`bad-several.yaml:12: limits.body_bytes: want a whole number, got "lots"`,
		`bad-several.yaml:14: log.level: must be "debug", "info", "warn" or "error", got "verbose"`,
	}, "\n"),
}

func TestParseBadFiles(t *testing.T) {
	for name, want := range badFiles {
		t.Run(name, func(t *testing.T) {
			cfg, err := Parse(name, readTestdata(t, name))
			if err == nil {
				t.Fatalf("got no error, want %q", want)
			}
			if got := err.Error(); got != want {
				t.Errorf("got error\n%s\nwant\n%s", got, want)
			}
			if !reflect.DeepEqual(cfg, Config{}) {
				t.Errorf("got config %+v with the error, want the zero Config", cfg)
			}
		})
	}
}

// TestEveryBadFileIsPinned keeps badFiles and testdata in step: a new
// bad-*.yaml without a pinned message, or a stale entry, fails here.
func TestEveryBadFileIsPinned(t *testing.T) {
	files, err := filepath.Glob("testdata/bad-*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	onDisk := map[string]bool{}
	for _, f := range files {
		onDisk[filepath.Base(f)] = true
		if _, ok := badFiles[filepath.Base(f)]; !ok {
			t.Errorf("testdata/%s has no entry in badFiles", filepath.Base(f))
		}
	}
	for name := range badFiles {
		if !onDisk[name] {
			t.Errorf("badFiles[%q] has no file in testdata", name)
		}
	}
}

func TestParseSeveralReportsEachProblem(t *testing.T) {
	_, err := Parse("bad-several.yaml", readTestdata(t, "bad-several.yaml"))
	joined, ok := err.(interface{ Unwrap() []error })
	if !ok {
		t.Fatalf("got %T, want an errors.Join error", err)
	}
	if got, want := len(joined.Unwrap()), 8; got != want {
		t.Errorf("got %d errors, want %d:\n%v", got, want, err)
	}
}

func TestParseDefaults(t *testing.T) {
	for _, name := range []string{"empty.yaml", "comments-only.yaml", "sections-empty.yaml"} {
		t.Run(name, func(t *testing.T) {
			got, err := Parse(name, readTestdata(t, name))
			if err != nil {
				t.Fatalf("got error %v, want none", err)
			}
			if want := Default(); !reflect.DeepEqual(got, want) {
				t.Errorf("got %+v, want Default() %+v", got, want)
			}
		})
	}
}

func TestParseGood(t *testing.T) {
	got, err := Load("testdata/good.yaml")
	if err != nil {
		t.Fatalf("got error %v, want none", err)
	}
	want := Default()
	want.Listen = ":8080"
	want.BaseURL = "https://app.example.com"
	want.Upstream = "http://app:3000/"
	want.Database.Path = "/var/lib/authsidecar/auth.db"
	want.Auth.JWTTTL = Duration(24 * time.Hour)
	want.Auth.Leeway = 0
	want.Auth.CookieSameSite = "none"
	want.Auth.TrustedOrigins = []string{"https://admin.example.com", "http://localhost:5173", "http://[::1]:5173"}
	want.Routes.Passthrough = []string{"/ws/browser", "/public/"}
	want.Routes.Admin = []AdminRoute{
		{Prefix: "/api/admin/", Roles: []string{"admin", "support_staff"}},
		{Prefix: "/api/billing/", Roles: []string{"billing-admin"}},
	}
	want.CORS.MaxAge = 0
	want.Proxy.TrustedProxies = []string{"10.0.0.0/8", "192.0.2.10", "2001:db8::/32"}
	want.Proxy.AllowedHosts = []string{"app.example.com", "app.example.com:8443", "[2001:db8::1]:8080", "192.0.2.1"}
	want.Limits.SigninPerEmail = Rate{}
	want.Limits.SigninPerIP = Rate{N: 100, Per: time.Hour}
	want.Limits.SignupPerIP = Rate{}
	want.Limits.PasswordHashConcurrency = 4
	want.Metrics.Listen = "0.0.0.0:9090"
	want.Log = Log{Format: "text", Level: "debug", Access: true}
	want.Cache.VerifiedTokens = 0
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
	if got, want := got.BaseOrigin(), "https://app.example.com"; got != want {
		t.Errorf("got BaseOrigin %q, want %q", got, want)
	}
}

// TestParseNullList: a list whose entries are all commented out is empty,
// not the default.
func TestParseNullList(t *testing.T) {
	got, err := Parse("t.yaml", []byte("routes:\n  passthrough:\n  #  - /ws/browser\n"))
	if err != nil {
		t.Fatalf("got error %v, want none", err)
	}
	if got := got.Routes.Passthrough; len(got) != 0 {
		t.Errorf("got passthrough %q, want none", got)
	}
}

func TestLoadMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nope.yaml")
	_, err := Load(path)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("got %v, want an error wrapping fs.ErrNotExist", err)
	}
	if !strings.Contains(err.Error(), path) {
		t.Errorf("got %q, want it to name %s", err, path)
	}
}

func TestLoadUsesPathInMessages(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sidecar.yaml")
	if err := os.WriteFile(path, []byte("auth:\n  jwt_ttl: -1h\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Load(path)
	if want := path + ":2: auth.jwt_ttl: must be positive, got -1h"; err == nil || err.Error() != want {
		t.Errorf("got %v, want %s", err, want)
	}
}

func TestSyntaxLineNumbers(t *testing.T) {
	tests := []struct {
		name, yaml, want string
	}{
		{"unclosed flow list", "a: 1\nb: 2\nc: [x\n", "t.yaml:3: did not find expected ',' or ']'"},
		{"unclosed flow map", "log: {level: info\n", "t.yaml:2: did not find expected ',' or '}'"},
		{"bad indent", "log:\n  level: info\n format: text\n", "t.yaml:3: did not find expected key"},
		{"mapping in scalar", "log: level: info\n", "t.yaml:1: mapping values are not allowed in this context"},
		{"unterminated string", "listen: \"x\n", "t.yaml:2: found unexpected end of stream"},
		{"unknown anchor", "listen: *x\n", "t.yaml: unknown anchor 'x' referenced"},
		{"tab on the first line", "\tlisten: x\n", "t.yaml:1: found character that cannot start any token"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("t.yaml", []byte(tt.yaml))
			if err == nil || err.Error() != tt.want {
				t.Errorf("got %v, want %s", err, tt.want)
			}
		})
	}
}

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}
