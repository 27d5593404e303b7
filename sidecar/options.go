package sidecar

import (
	"log/slog"
	"net/http"

	"github.com/authsidecar/authsidecar/config"
	"github.com/authsidecar/authsidecar/issuer"
)

// IssuerOptions maps the config onto the issuer: the issuer never sees
// the config type, so a config change stops here.
func IssuerOptions(cfg config.Config, secret config.Secret, store issuer.Store, log *slog.Logger) issuer.Options {
	return issuer.Options{
		Store:             store,
		Secret:            secret.Bytes(),
		BaseURL:           cfg.BaseURL,
		JWTIssuer:         cfg.JWTIssuer(),
		TrustedOrigins:    cfg.Auth.TrustedOrigins,
		JWTTTL:            cfg.Auth.JWTTTL.D(),
		SessionTTL:        cfg.Auth.SessionTTL.D(),
		SessionUpdateAge:  cfg.Auth.SessionUpdateAge.D(),
		CookieName:        cfg.Auth.CookieName,
		CookieSameSite:    sameSite(cfg.Auth.CookieSameSite),
		MinPasswordLength: cfg.Auth.MinPasswordLength,
		MaxPasswordLength: cfg.Auth.MaxPasswordLength,
		Limits:            issuerLimits(cfg.Limits),
		KeyCooldown:       cfg.Keys.Cooldown.D(),
		Recovery: issuer.RecoveryOptions{
			ResetTokenTTL:            cfg.Auth.ResetTokenTTL.D(),
			VerificationTokenTTL:     cfg.Auth.VerificationTokenTTL.D(),
			RequireEmailVerification: cfg.Auth.RequireEmailVerification,
			SendOnSignin:             cfg.Auth.SendVerificationOnSignin,
			SignInAfterVerification:  cfg.Auth.SignInAfterVerification,
			KeepSessionsOnReset:      !cfg.Auth.RevokeSessionsOnPasswordReset,
			ResetPage:                cfg.Auth.ResetPageURL,
		},
		Accounts: issuer.AccountOptions{
			KeepJWTsOnSignOut: !cfg.Auth.RevokeJWTOnSignOut,
			AllowDeleteUser:   cfg.Auth.AllowDeleteUser,
		},
		Logger: log,
	}
}

// betterAuthCookie is the Better Auth session cookie accepted after its
// database was imported (auth.better_auth_secret_env); the zero value,
// none, when the key is empty.
func betterAuthCookie(cfg config.Config, getenv func(string) string) (issuer.BetterAuthCookie, error) {
	secret, err := cfg.LoadBetterAuthSecret(getenv)
	if err != nil || len(secret.Bytes()) == 0 {
		return issuer.BetterAuthCookie{}, err
	}
	return issuer.BetterAuthCookie{Name: cfg.Auth.BetterAuthCookie, Secret: secret.Bytes()}, nil
}

// issuerLimits is config's limits as the issuer takes them, at start and
// on reload.
func issuerLimits(l config.Limits) issuer.Limits {
	return issuer.Limits{
		BodyBytes:               l.BodyBytes,
		PasswordHashConcurrency: l.PasswordHashConcurrency,
		SignInPerIP:             issuer.Rate(l.SigninPerIP),
		SignInPerEmail:          issuer.Rate(l.SigninPerEmail),
		SignUpPerIP:             issuer.Rate(l.SignupPerIP),
		MailPerIP:               issuer.Rate(l.MailPerIP),
		MailPerEmail:            issuer.Rate(l.MailPerEmail),
		TokenPerIP:              issuer.Rate(l.TokenPerIP),
		PasswordCheckPerUser:    issuer.Rate(l.PasswordCheckPerUser),
		PasswordCheckPerIP:      issuer.Rate(l.PasswordCheckPerIP),
		IPv6Prefix:              l.IPv6Prefix,
		BodyReadTimeout:         l.BodyReadTimeout.D(),
	}
}

func sameSite(s config.SameSite) http.SameSite {
	switch s {
	case config.SameSiteStrict:
		return http.SameSiteStrictMode
	case config.SameSiteNone:
		return http.SameSiteNoneMode
	}
	return http.SameSiteLaxMode
}
