package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/authsidecar/authsidecar/config"
	"github.com/authsidecar/authsidecar/issuer"
	"github.com/authsidecar/authsidecar/jwks"
)

// cmdCheck validates everything serve would need and reports every problem
// it finds, not just the first.
func cmdCheck(ctx context.Context, e *cliEnv, args []string) error {
	if err := noArgs("check", args); err != nil {
		return err
	}
	var problems []error
	cfg, err := config.Load(e.configPath)
	if err != nil {
		// Without a config there is no database path or secret name to try.
		return err
	}
	fmt.Fprintf(e.stdout, "ok    config %s\n", e.configPath)
	var secret config.Secret
	if cfg.NeedsSecret() {
		if secret, err = cfg.LoadSecret(e.getenv); err != nil {
			problems = append(problems, err)
		} else {
			fmt.Fprintf(e.stdout, "ok    secret from $%s\n", cfg.Auth.SecretEnv)
		}
	}
	db, err := openStore(ctx, cfg, e.getenv)
	switch {
	case err != nil:
		problems = append(problems, err)
	case db == nil:
		fmt.Fprintln(e.stdout, "ok    no database (verifier mode)")
	default:
		defer db.Close()
		fmt.Fprintf(e.stdout, "ok    database %s (schema migrated)\n", db)
	}
	if cfg.Verifier() {
		problems = append(problems, checkJWKS(ctx, cfg, e)...)
	} else if db != nil && len(secret.Bytes()) > 0 {
		keys, err := issuer.InspectKeys(ctx, db, secret.Bytes(), cfg.Auth.JWTTTL.D(), nil, newLogger(config.Log{Level: "error"}, io.Discard))
		if err != nil {
			problems = append(problems, err)
		}
		usable := 0
		for _, k := range keys {
			if k.Usable {
				usable++
				fmt.Fprintf(e.stdout, "ok    key %s created %s\n", k.KID, k.CreatedAt.Format("2006-01-02T15:04:05Z"))
			} else {
				fmt.Fprintf(e.stdout, "WARN  key %s unusable: %s\n", k.KID, k.Problem)
			}
		}
		switch {
		case err != nil:
		case len(keys) == 0:
			fmt.Fprintln(e.stdout, "ok    no signing key yet: serve creates one on start")
		case usable == 0:
			problems = append(problems, fmt.Errorf("keys: none of the %d stored keys decrypts with $%s: was the secret changed? serve would make a new key and every issued JWT would stop verifying", len(keys), cfg.Auth.SecretEnv))
		}
	}
	if len(problems) > 0 {
		return errors.Join(problems...)
	}
	fmt.Fprintln(e.stdout, "all checks passed")
	return nil
}

// checkJWKS fetches a verifier's JWKS once and reports the keys it would
// verify with.
func checkJWKS(ctx context.Context, cfg config.Config, e *cliEnv) []error {
	f, err := jwks.New(jwks.Options{URL: cfg.Keys.JWKSURL, CAFile: cfg.Keys.JWKSCAFile, Logger: newLogger(config.Log{Level: "error"}, io.Discard)})
	if err != nil {
		return []error{fmt.Errorf("keys.jwks_url: %w", err)}
	}
	keys, err := f.PublicKeys(ctx)
	if err != nil {
		return []error{fmt.Errorf("keys.jwks_url: %w", err)}
	}
	fmt.Fprintf(e.stdout, "ok    jwks %s (%s; iss and aud %s)\n", cfg.Keys.JWKSURL, plural(len(keys), "Ed25519 key"), cfg.JWTIssuer())
	return nil
}
