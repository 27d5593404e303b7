package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/authsidecar/authsidecar/config"
	"github.com/authsidecar/authsidecar/internal/errlist"
	"github.com/authsidecar/authsidecar/issuer"
	"github.com/authsidecar/authsidecar/jwks"
	"github.com/authsidecar/authsidecar/sidecar"
	"github.com/authsidecar/authsidecar/sqlstore"
)

// cmdCheck validates everything serve would need and reports every problem
// it finds in one run, not just the first. It is read-only: it creates,
// migrates and writes nothing (sqlstore's Inspect functions open the
// database so that they cannot), so it is safe to run against a live
// sidecar's database, or a wrong one.
func cmdCheck(ctx context.Context, e *cliEnv, args []string) error {
	if err := noArgs("check", args); err != nil {
		return err
	}
	r := &checkReport{w: e.stdout}
	cfg, err := config.Load(e.configPath)
	if err != nil {
		r.fail(err)
		// The secret is still worth checking: one run should say all a new
		// user has to fix. Its name and whether it is needed are read from
		// the file as far as it goes, else the defaults.
		data, _ := os.ReadFile(e.configPath)
		env, needed := config.SecretHint(data)
		switch {
		case env == "":
			r.skip("secret: auth.secret_env is not a valid name (above)")
		case needed:
			checkSecret(r, config.Config{Auth: config.Auth{SecretEnv: env}}, e.getenv)
		}
		r.skip("database and keys: checked once the config loads")
		return r.result()
	}
	r.ok("config %s", e.configPath)
	var secret config.Secret
	if cfg.NeedsSecret() {
		secret = checkSecret(r, cfg, e.getenv)
	}
	checkMail(r, cfg, e.getenv)
	checkNetwork(ctx, r, cfg)
	checkAdminRoutes(r, cfg)
	checkProviders(ctx, r, cfg, e.getenv, e.online)
	in, dbOK := checkDatabase(ctx, r, cfg, e.getenv)
	switch {
	case cfg.Verifier():
		checkJWKS(ctx, r, cfg)
	case !dbOK:
		r.skip("keys: not checked: the database problem above comes first")
	case len(in.Keys) == 0:
		r.ok("no signing key yet: serve creates one on start")
	case len(secret.Bytes()) == 0:
		r.skip("keys: %s stored, not decrypted without the secret", plural(len(in.Keys), "key"))
	default:
		checkKeys(r, cfg, secret, in.Keys)
	}
	return r.result()
}

// checkSecret reports whether the secret loads, and returns it.
func checkSecret(r *checkReport, cfg config.Config, getenv func(string) string) config.Secret {
	secret, err := cfg.LoadSecret(getenv)
	if err != nil {
		r.fail(err)
		return config.Secret{}
	}
	r.ok("secret from $%s", cfg.Auth.SecretEnv)
	return secret
}

// checkMail builds the mail delivery as serve would, without sending: the
// secret it needs, its options and every template (executed once).
func checkMail(r *checkReport, cfg config.Config, getenv func(string) string) {
	if cfg.Email.Delivery == config.DeliveryOff {
		return
	}
	ms, err := cfg.LoadMailSecret(getenv)
	if err != nil {
		r.fail(err)
		return
	}
	if _, err := sidecar.NewSender(cfg, ms, sidecar.NewLogger(config.Log{Level: "error"}, io.Discard)); err != nil {
		r.fail(err)
		return
	}
	if _, err := sidecar.MailTemplates(cfg); err != nil {
		r.fail(err)
		return
	}
	r.ok("mail delivery %s (templates checked; nothing sent)", cfg.Email.Delivery)
}

// checkDatabase reads the database as serve would find it, without
// touching it. ok is false when it could not be read (or serve would
// refuse it); in holds what was read either way.
func checkDatabase(ctx context.Context, r *checkReport, cfg config.Config, getenv func(string) string) (in sqlstore.Inspection, ok bool) {
	var err error
	switch cfg.Database.Driver {
	case config.DriverNone:
		r.ok("no database (verifier mode)")
		return in, true
	case config.DriverPostgres:
		url, uerr := cfg.LoadDatabaseURL(getenv)
		if uerr != nil {
			r.fail(uerr)
			return in, false
		}
		in, err = sqlstore.InspectPostgres(ctx, sqlstore.PostgresOptions{URL: string(url.Bytes()), MaxConns: cfg.Database.MaxConns})
		err = errlist.Prefix("database", err)
	default:
		in, err = sqlstore.InspectSQLite(ctx, cfg.Database.Path)
		err = errlist.Prefix("database "+cfg.Database.Path, err)
	}
	if err != nil {
		r.fail(err)
		// Keys that could be read are still worth decrypting (a file
		// serve could not write, say); a schema too new is not read.
		return in, in.Keys != nil
	}
	switch {
	case !in.Exists && cfg.Database.Driver == config.DriverSQLite:
		r.ok("database %s does not exist yet: serve creates it", in.Where)
	case !in.Exists:
		r.ok("database %s has no authsidecar tables yet: serve creates them", in.Where)
	case in.Pending() > 0:
		r.ok("database %s (schema version %d, this binary's is %d): %s pending; serve applies them", in.Where, in.Version, in.Known, plural(in.Pending(), "migration"))
	default:
		r.ok("database %s (schema version %d, current)", in.Where, in.Version)
	}
	return in, true
}

// checkKeys decrypts the stored keys with the secret.
func checkKeys(r *checkReport, cfg config.Config, secret config.Secret, recs []issuer.KeyRecord) {
	keys := issuer.InspectKeyRecords(recs, keyView(cfg, secret))
	usable := 0
	for _, k := range keys {
		if k.Usable {
			usable++
			r.ok("key %s created %s", k.KID, k.CreatedAt.Format("2006-01-02T15:04:05Z"))
		} else {
			r.warn("key %s unusable: %s", k.KID, k.Problem)
		}
	}
	if usable == 0 {
		r.fail(fmt.Errorf("keys: none of the %d stored keys decrypts with $%s: was the secret changed? serve would make a new key and every issued JWT would stop verifying", len(keys), cfg.Auth.SecretEnv))
	}
}

// checkJWKS fetches a verifier's JWKS once and reports the keys it would
// verify with.
func checkJWKS(ctx context.Context, r *checkReport, cfg config.Config) {
	f, err := jwks.New(jwks.Options{URL: cfg.Keys.JWKSURL, CAFile: cfg.Keys.JWKSCAFile, Logger: sidecar.NewLogger(config.Log{Level: "error"}, io.Discard)})
	if err != nil {
		// Validate checked the URL, so what fails here is the CA file.
		field := "keys.jwks_url"
		if cfg.Keys.JWKSCAFile != "" {
			field = "keys.jwks_ca_file"
		}
		r.fail(fmt.Errorf("%s: %w", field, err))
		return
	}
	if cfg.Keys.JWKSCAFile != "" {
		r.ok("jwks CA file %s", cfg.Keys.JWKSCAFile)
	}
	keys, err := f.PublicKeys(ctx)
	if err != nil {
		r.fail(fmt.Errorf("keys.jwks_url: %w", err))
		return
	}
	r.ok("jwks %s (%s; iss and aud %s)", cfg.Keys.JWKSURL, plural(len(keys), "Ed25519 key"), cfg.JWTIssuer())
}

// checkReport writes check's lines: "ok", "WARN" (serve would run, but
// look), "skip" (not checked, and why) and "FAIL", one problem a line,
// then a summary.
type checkReport struct {
	w        io.Writer
	problems []error
}

func (r *checkReport) line(tag, format string, args ...any) {
	fmt.Fprintf(r.w, "%-6s%s\n", tag, fmt.Sprintf(format, args...))
}

func (r *checkReport) ok(format string, args ...any)   { r.line("ok", format, args...) }
func (r *checkReport) warn(format string, args ...any) { r.line("WARN", format, args...) }
func (r *checkReport) skip(format string, args ...any) { r.line("skip", format, args...) }

// fail reports err, one line for each error it joins (config.Load joins
// one per problem in the file).
func (r *checkReport) fail(err error) {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			r.fail(e)
		}
		return
	}
	for _, l := range strings.Split(err.Error(), "\n") {
		r.line("FAIL", "%s", l)
	}
	r.problems = append(r.problems, err)
}

// result ends the report: "all checks passed", or the number of problems
// and an error that main does not print again.
func (r *checkReport) result() error {
	if len(r.problems) == 0 {
		fmt.Fprintln(r.w, "all checks passed")
		return nil
	}
	fmt.Fprintf(r.w, "%s found\n", plural(len(r.problems), "problem"))
	return checkFailed(r.problems)
}

// checkFailed is check's error: every problem, already printed.
type checkFailed []error

func (c checkFailed) Error() string        { return errors.Join(c...).Error() }
func (c checkFailed) Unwrap() []error      { return c }
func (c checkFailed) Is(target error) bool { return target == errReported }
