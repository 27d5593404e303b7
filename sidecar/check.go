package sidecar

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/authsidecar/authsidecar/config"
	"github.com/authsidecar/authsidecar/idp"
	"github.com/authsidecar/authsidecar/internal/errlist"
	"github.com/authsidecar/authsidecar/issuer"
	"github.com/authsidecar/authsidecar/jwks"
	"github.com/authsidecar/authsidecar/sqlstore"
)

// Reporter receives check's findings, one a call: OK (fine), Warn (serve
// would run, but look), Skip (not checked, and why) and Fail (a problem;
// an error joining several is several problems).
type Reporter interface {
	OK(format string, args ...any)
	Warn(format string, args ...any)
	Skip(format string, args ...any)
	Fail(err error)
}

// CheckOptions say what Check looks at.
type CheckOptions struct {
	// ConfigPath is the config file. Required.
	ConfigPath string
	// Getenv reads the environment: the secret, the database URL, the
	// mail and identity provider secrets. Nil: os.Getenv.
	Getenv func(string) string
	// Online also fetches each identity provider's discovery document
	// and JWKS. Zero: providers are not contacted.
	Online bool
}

// Check reports what New would meet with the config at o.ConfigPath,
// every problem in one run, not just the first: the config, the secret,
// the mail delivery and its templates, the network (the upstream, the
// listen addresses), the identity providers, the database and the keys
// (decrypted with the secret; in verifier mode the JWKS, fetched once).
// It is read-only: it creates, migrates and writes nothing (sqlstore's
// Inspect functions open the database so that they cannot), so it is safe
// against a live sidecar's database, or a wrong one.
func Check(ctx context.Context, o CheckOptions, r Reporter) {
	getenv := o.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	cfg, err := config.Load(o.ConfigPath)
	if err != nil {
		r.Fail(err)
		// The secret is still worth checking: one run should say all a new
		// user has to fix. Its name and whether it is needed are read from
		// the file as far as it goes, else the defaults.
		data, _ := os.ReadFile(o.ConfigPath)
		env, needed := config.SecretHint(data)
		switch {
		case env == "":
			r.Skip("secret: auth.secret_env is not a valid name (above)")
		case needed:
			checkSecret(r, config.Config{Auth: config.Auth{SecretEnv: env}}, getenv)
		}
		r.Skip("database and keys: checked once the config loads")
		return
	}
	r.OK("config %s", o.ConfigPath)
	var secret config.Secret
	if cfg.NeedsSecret() {
		secret = checkSecret(r, cfg, getenv)
	}
	checkMail(r, cfg, getenv)
	checkNetwork(ctx, r, cfg)
	checkAdminRoutes(r, cfg)
	checkProviders(ctx, r, cfg, getenv, o.Online)
	checkLegacy(r, cfg, getenv)
	checkBetterAuthCookie(r, cfg, getenv)
	in, dbOK := checkDatabase(ctx, r, cfg, getenv)
	switch {
	case cfg.Verifier():
		checkJWKS(ctx, r, cfg)
	case !dbOK:
		r.Skip("keys: not checked: the database problem above comes first")
	case len(in.Keys) == 0:
		r.OK("no signing key yet: serve creates one on start")
	case len(secret.Bytes()) == 0:
		r.Skip("keys: %s stored, not decrypted without the secret", plural(len(in.Keys), "key"))
	default:
		checkKeys(r, cfg, secret, in.Keys)
	}
}

// checkSecret reports whether the secret loads, and returns it.
func checkSecret(r Reporter, cfg config.Config, getenv func(string) string) config.Secret {
	secret, err := cfg.LoadSecret(getenv)
	if err != nil {
		r.Fail(err)
		return config.Secret{}
	}
	r.OK("secret from $%s", cfg.Auth.SecretEnv)
	return secret
}

// checkMail builds the mail delivery as serve would, without sending: the
// secret it needs, its options and every template (executed once).
func checkMail(r Reporter, cfg config.Config, getenv func(string) string) {
	if cfg.Email.Delivery == config.DeliveryOff {
		return
	}
	ms, err := cfg.LoadMailSecret(getenv)
	if err != nil {
		r.Fail(err)
		return
	}
	if _, err := NewSender(cfg, ms, NewLogger(config.Log{Level: config.LevelError}, io.Discard)); err != nil {
		r.Fail(err)
		return
	}
	if _, err := MailTemplates(cfg); err != nil {
		r.Fail(err)
		return
	}
	r.OK("mail delivery %s (templates checked; nothing sent)", cfg.Email.Delivery)
}

// checkLegacy builds lazy migration's client as serve would, without
// calling the legacy application: a sign-in would be a password check.
func checkLegacy(r Reporter, cfg config.Config, getenv func(string) string) {
	if cfg.Migration.LegacySignin.URL == "" {
		return
	}
	if _, err := legacySignIn(cfg, getenv, nil); err != nil {
		r.Fail(err)
		return
	}
	r.OK("lazy migration: legacy sign-in at %s, secret from $%s (not contacted)", origin(cfg.Migration.LegacySignin.URL), cfg.Migration.LegacySignin.SecretEnv)
}

// checkBetterAuthCookie reads Better Auth's secret as serve would, when
// its cookie is accepted.
func checkBetterAuthCookie(r Reporter, cfg config.Config, getenv func(string) string) {
	if cfg.Auth.BetterAuthSecretEnv == "" {
		return
	}
	if _, err := cfg.LoadBetterAuthSecret(getenv); err != nil {
		r.Fail(err)
		return
	}
	r.OK("Better Auth session cookies %s accepted, signed with $%s", cfg.Auth.BetterAuthCookie, cfg.Auth.BetterAuthSecretEnv)
}

// checkDatabase reads the database as serve would find it, without
// touching it. ok is false when it could not be read (or serve would
// refuse it); in holds what was read either way.
func checkDatabase(ctx context.Context, r Reporter, cfg config.Config, getenv func(string) string) (in sqlstore.Inspection, ok bool) {
	var err error
	switch cfg.Database.Driver {
	case config.DriverNone:
		r.OK("no database (verifier mode)")
		return in, true
	case config.DriverPostgres:
		url, uerr := cfg.LoadDatabaseURL(getenv)
		if uerr != nil {
			r.Fail(uerr)
			return in, false
		}
		in, err = sqlstore.InspectPostgres(ctx, sqlstore.PostgresOptions{URL: string(url.Bytes()), MaxConns: cfg.Database.MaxConns})
		err = errlist.Prefix("database", err)
	default:
		in, err = sqlstore.InspectSQLite(ctx, cfg.Database.Path)
		err = errlist.Prefix("database "+cfg.Database.Path, err)
	}
	if err != nil {
		r.Fail(err)
		// Keys that could be read are still worth decrypting (a file
		// serve could not write, say); a schema too new is not read.
		return in, in.Keys != nil
	}
	switch {
	case !in.Exists && cfg.Database.Driver == config.DriverSQLite:
		r.OK("database %s does not exist yet: serve creates it", in.Where)
	case !in.Exists:
		r.OK("database %s has no authsidecar tables yet: serve creates them", in.Where)
	case in.Pending() > 0:
		r.OK("database %s (schema version %d, this binary's is %d): %s pending; serve applies them", in.Where, in.Version, in.Known, plural(in.Pending(), "migration"))
	default:
		r.OK("database %s (schema version %d, current)", in.Where, in.Version)
	}
	return in, true
}

// checkKeys decrypts the stored keys with the secret.
func checkKeys(r Reporter, cfg config.Config, secret config.Secret, recs []issuer.KeyRecord) {
	keys := issuer.InspectKeyRecords(recs, KeyView(cfg, secret))
	usable := 0
	for _, k := range keys {
		if k.Usable {
			usable++
			r.OK("key %s created %s", k.KID, k.CreatedAt.Format("2006-01-02T15:04:05Z"))
		} else {
			r.Warn("key %s unusable: %s", k.KID, k.Problem)
		}
	}
	if usable == 0 {
		r.Fail(fmt.Errorf("keys: none of the %d stored keys decrypts with $%s: was the secret changed? serve would make a new key and every issued JWT would stop verifying", len(keys), cfg.Auth.SecretEnv))
	}
}

// checkJWKS fetches a verifier's JWKS once and reports the keys it would
// verify with.
func checkJWKS(ctx context.Context, r Reporter, cfg config.Config) {
	f, err := jwks.New(jwks.Options{URL: cfg.Keys.JWKSURL, CAFile: cfg.Keys.JWKSCAFile, Logger: NewLogger(config.Log{Level: config.LevelError}, io.Discard)})
	if err != nil {
		// Validate checked the URL, so what fails here is the CA file.
		field := "keys.jwks_url"
		if cfg.Keys.JWKSCAFile != "" {
			field = "keys.jwks_ca_file"
		}
		r.Fail(fmt.Errorf("%s: %w", field, err))
		return
	}
	if cfg.Keys.JWKSCAFile != "" {
		r.OK("jwks CA file %s", cfg.Keys.JWKSCAFile)
	}
	keys, err := f.PublicKeys(ctx)
	if err != nil {
		r.Fail(fmt.Errorf("keys.jwks_url: %w", err))
		return
	}
	r.OK("jwks %s (%s; iss and aud %s)", cfg.Keys.JWKSURL, plural(len(keys), "Ed25519 key"), cfg.JWTIssuer())
}

// checkProviders reports each identity provider: its client secret from
// the environment and, with -online, what its discovery document and JWKS
// say (fetched once, as a sign-in would; nothing is kept).
func checkProviders(ctx context.Context, r Reporter, cfg config.Config, getenv func(string) string, online bool) {
	if len(cfg.IdentityProviders) == 0 {
		return
	}
	pcs, err := ProviderConfigs(cfg, getenv)
	if err != nil {
		r.Fail(err)
		return
	}
	for _, pc := range pcs {
		if !online {
			r.OK("identity provider %s (%s): not contacted; -online fetches its discovery document and keys", pc.ID, pc.Kind)
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		rep, err := idp.Probe(pctx, pc, idp.Options{Logger: NewLogger(config.Log{Level: config.LevelError}, io.Discard)})
		cancel()
		switch {
		case errors.Is(err, idp.ErrNothingToProbe):
			r.OK("identity provider %s (%s): nothing to fetch before a sign-in (no discovery, no id tokens)", pc.ID, pc.Kind)
		case err != nil:
			r.Fail(fmt.Errorf("identity provider %s: %w", pc.ID, err))
		default:
			iss := "no RFC 9207 iss"
			if rep.IssParam {
				iss = "sends RFC 9207 iss"
			}
			r.OK("identity provider %s (%s): issuer %s, authorization %s, token %s, jwks %s (%s; %s), %s",
				pc.ID, pc.Kind, rep.Issuer, rep.AuthURL, rep.TokenURL, rep.JWKSURL, plural(rep.Keys, "key"), strings.Join(rep.Algs, " "), iss)
		}
	}
}

// KeyView judges stored keys as New would with cfg and secret; problems
// are reported by the caller, not logged.
func KeyView(cfg config.Config, secret config.Secret) issuer.KeyView {
	return issuer.KeyView{
		Secret: secret.Bytes(), JWTTTL: cfg.Auth.JWTTTL.D(), KeyCooldown: cfg.Keys.Cooldown.D(),
		Logger: NewLogger(config.Log{Level: config.LevelError}, io.Discard),
	}
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}
