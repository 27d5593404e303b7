package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/authsidecar/authsidecar/config"
	"github.com/authsidecar/authsidecar/issuer"
	"github.com/authsidecar/authsidecar/sidecar"
)

// cmdKeysList prints every stored key and what the current secret makes of it.
func cmdKeysList(ctx context.Context, e *cliEnv, _ []string) error {
	a, err := openAdmin(ctx, e, true)
	if err != nil {
		return err
	}
	defer a.Close()
	keys, err := inspectKeys(ctx, a)
	if err != nil {
		return err
	}
	if len(keys) == 0 {
		fmt.Fprintln(e.stdout, "no signing keys yet: serve (or keys rotate) creates one")
		return nil
	}
	now := time.Now()
	jwtTTL := a.cfg.Auth.JWTTTL.D()
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KID\tCREATED\tEXPIRES\tSTATUS")
	signer := false
	for _, k := range keys { // newest first
		var status string
		switch {
		case !k.Usable:
			status = "unusable: " + k.Problem
		case k.Signs:
			status, signer = "usable: signs new JWTs", true
		case !k.SignsFrom.IsZero():
			status = "usable: published ahead of use, signs from " + timeText(k.SignsFrom)
		case k.ExpiresAt.IsZero() || now.Before(k.ExpiresAt):
			status = "usable: verifies only (another key signs)"
		default:
			status = "usable: retired, verifies JWTs until " + timeText(k.ExpiresAt.Add(jwtTTL))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", k.KID, timeText(k.CreatedAt), timeText(k.ExpiresAt), status)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if !signer {
		fmt.Fprintf(e.stdout, "no key can sign with $%s: serve would create a new one, and JWTs signed by unusable keys stop verifying\n", a.cfg.Auth.SecretEnv)
	}
	return nil
}

// cmdKeysRotate makes a new signing key in the database the running
// sidecar uses; it picks the key up without a restart.
func cmdKeysRotate(ctx context.Context, e *cliEnv, _ []string) error {
	a, err := openAdmin(ctx, e, true)
	if err != nil {
		return err
	}
	defer a.Close()
	now := time.Now()
	before, err := inspectKeys(ctx, a)
	if err != nil {
		return err
	}
	if len(before) > 0 && countUsable(before) == 0 {
		// issuer.New would make a key under this secret, one the sidecar
		// (holding the right secret) cannot open: refuse instead.
		return fmt.Errorf("keys rotate: none of the %d stored keys is usable with $%s (keys list says why): refusing to add a key the sidecar may not be able to open; is it the secret the sidecar runs with?", len(before), a.cfg.Auth.SecretEnv)
	}
	canSign := false
	for _, k := range before {
		canSign = canSign || k.Usable && (k.ExpiresAt.IsZero() || now.Before(k.ExpiresAt))
	}
	opts := sidecar.IssuerOptions(a.cfg, a.secret, a.db, sidecar.NewLogger(config.Log{Level: config.LevelWarn, Format: a.cfg.Log.Format}, e.stderr))
	iss, err := issuer.New(ctx, opts)
	if err != nil {
		return err
	}
	if !canSign {
		// New made the first key (the store had no signing key): that is
		// the rotation; retiring it at once would be pointless.
		after, err := inspectKeys(ctx, a)
		if err != nil {
			return err
		}
		known := map[string]bool{}
		for _, k := range before {
			known[k.KID] = true
		}
		for _, k := range after {
			if !known[k.KID] {
				fmt.Fprintf(e.stdout, "no key could sign: created signing key %s\n", k.KID)
			}
		}
	} else {
		k, err := iss.RotateKey(ctx)
		if err != nil {
			return fmt.Errorf("keys rotate: %w", err)
		}
		after, err := inspectKeys(ctx, a)
		if err != nil {
			return err
		}
		for _, ki := range after {
			if ki.KID == k.KID {
				fmt.Fprintf(e.stdout, "new signing key %s: in JWKS now, signs from %s (published longer than keys.cooldown = %s first,\n"+
					"so every verifier that meets it may fetch it)\n", k.KID, timeText(ki.SignsFrom), a.cfg.Keys.Cooldown)
			}
		}
		// The keys that could sign before are the ones RotateKey retires.
		retired := map[string]bool{}
		for _, k := range before {
			retired[k.KID] = k.Usable && (k.ExpiresAt.IsZero() || now.Before(k.ExpiresAt))
		}
		for _, k := range after {
			if retired[k.KID] {
				fmt.Fprintf(e.stdout, "retiring %s: signs until %s; stays in JWKS until %s (+ auth.jwt_ttl), so the JWTs it signed keep verifying\n",
					k.KID, timeText(k.ExpiresAt), timeText(k.ExpiresAt.Add(a.cfg.Auth.JWTTTL.D())))
			}
		}
	}
	fmt.Fprintf(e.stdout, "A running sidecar needs no restart: its get-session reads the key records and signs with the new key\n"+
		"once it may. Verifiers should run with a keys.cooldown no longer than this file's (%s).\n", a.cfg.Keys.Cooldown)
	return nil
}

func inspectKeys(ctx context.Context, a *adminEnv) ([]issuer.KeyInfo, error) {
	// Problems are reported in the listing; the issuer's log line would
	// only repeat them.
	keys, err := issuer.InspectKeys(ctx, a.db, keyView(a.cfg, a.secret))
	if err != nil {
		return nil, fmt.Errorf("keys: %w", err)
	}
	return keys, nil
}

// keyView judges stored keys as serve would with cfg and secret;
// problems are reported by the caller, not logged.
func keyView(cfg config.Config, secret config.Secret) issuer.KeyView {
	return issuer.KeyView{
		Secret: secret.Bytes(), JWTTTL: cfg.Auth.JWTTTL.D(), KeyCooldown: cfg.Keys.Cooldown.D(),
		Logger: sidecar.NewLogger(config.Log{Level: config.LevelError}, io.Discard),
	}
}

func countUsable(keys []issuer.KeyInfo) int {
	n := 0
	for _, k := range keys {
		if k.Usable {
			n++
		}
	}
	return n
}
