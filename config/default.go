package config

import "time"

// Default returns the configuration used when the file sets nothing. Each call
// returns fresh slices, so callers may modify the result.
func Default() Config {
	return Config{
		Mode:     ModeFull,
		Listen:   "127.0.0.1:8080",
		BaseURL:  "http://localhost:8080",
		Upstream: "http://127.0.0.1:3000",
		Database: Database{Driver: DriverSQLite, Path: "authsidecar.db", URLEnv: "DATABASE_URL", MaxConns: 10},
		Auth: Auth{
			SecretEnv:         "AUTH_SECRET",
			JWTTTL:            Duration(720 * time.Hour),
			Leeway:            Duration(30 * time.Second),
			SessionTTL:        Duration(168 * time.Hour),
			SessionUpdateAge:  Duration(24 * time.Hour),
			CookieName:        "auth.session_token",
			CookieSameSite:    SameSiteLax,
			MinPasswordLength: 8,
			MaxPasswordLength: 128,
			// Empty, not nil: "trusted_origins: []" decodes to an empty
			// slice, and the shipped file must decode to exactly Default().
			TrustedOrigins:                []string{},
			ResetTokenTTL:                 Duration(time.Hour),
			VerificationTokenTTL:          Duration(24 * time.Hour),
			RevokeSessionsOnPasswordReset: true,
			RevokeJWTOnSignOut:            true,
			BetterAuthCookie:              "better-auth.session_token",
		},
		Keys: Keys{
			MaxAge: Duration(10 * time.Minute), Cooldown: Duration(30 * time.Second), StaleIfError: Duration(time.Hour),
			RevocationsURL: RevocationsAuto, RevocationsStaleIfError: Duration(5 * time.Minute),
		},
		Revocation: Revocation{PollInterval: Duration(time.Second)},
		Sweep:      Sweep{Interval: Duration(time.Minute)},
		Routes: Routes{
			IdentityHeader:    "X-User-Id",
			CookieOnly:        []string{"/api/mcp-oauth/authorize"},
			Passthrough:       []string{"/ws/browser"},
			WebsocketPrefixes: []string{"/ws/"},
			Admin:             []AdminRoute{{Prefix: "/api/admin/", Roles: []string{"admin"}}},
		},
		CORS: CORS{AllowCredentials: true, MaxAge: Duration(10 * time.Minute)},
		Proxy: Proxy{
			ResponseHeaderTimeout: Duration(60 * time.Second),
			UpstreamMaxConns:      256,
			UpstreamMaxPending:    1024,
			UpstreamClientShare:   25,
			BodyMinRate:           1 << 10,
			BodyRateGrace:         Duration(10 * time.Second),
			BodyBuffer:            64 << 10,
			TrustedProxies:        []string{},
			AllowedHosts:          []string{},
			StripHeaders:          []string{},
		},
		Limits: Limits{
			BodyBytes:            64 << 10,
			SigninPerEmail:       Rate{N: 5, Per: time.Minute},
			SigninPerIP:          Rate{N: 20, Per: time.Minute},
			SignupPerIP:          Rate{N: 10, Per: time.Minute},
			MailPerEmail:         Rate{N: 3, Per: time.Hour},
			MailPerIP:            Rate{N: 10, Per: time.Hour},
			TokenPerIP:           Rate{N: 30, Per: time.Minute},
			PasswordCheckPerUser: Rate{N: 5, Per: time.Minute},
			PasswordCheckPerIP:   Rate{N: 20, Per: time.Minute},
			IPv6Prefix:           64,
			BodyReadTimeout:      Duration(10 * time.Second),
		},
		Metrics:  Metrics{Listen: "127.0.0.1:9090"},
		Health:   Health{ReadyRequiresDatabase: true},
		Log:      Log{Format: FormatJSON, Level: LevelInfo, Access: true},
		Shutdown: Shutdown{Grace: Duration(25 * time.Second)},
		Cache:    Cache{VerifiedTokens: 100000},
		Email: Email{
			Delivery:    DeliveryOff,
			MaxAttempts: 10,
			SMTP:        SMTP{PasswordEnv: "SMTP_PASSWORD", TLS: TLSStartTLS},
			Webhook:     Webhook{SecretEnv: "EMAIL_WEBHOOK_SECRET", Timeout: Duration(10 * time.Second)},
		},
		IdentityProviders: []IdentityProvider{},
		Migration:         Migration{LegacySignin: LegacySignin{SecretEnv: "LEGACY_SIGNIN_SECRET", Timeout: Duration(3 * time.Second)}},
	}
}
