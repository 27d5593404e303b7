package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/authsidecar/authsidecar/config"
	"github.com/authsidecar/authsidecar/idp"
	"github.com/authsidecar/authsidecar/sidecar"
)

// checkProviders reports each identity provider: its client secret from
// the environment and, with -online, what its discovery document and JWKS
// say (fetched once, as a sign-in would; nothing is kept).
func checkProviders(ctx context.Context, r *checkReport, cfg config.Config, getenv func(string) string, online bool) {
	if len(cfg.IdentityProviders) == 0 {
		return
	}
	pcs, err := sidecar.ProviderConfigs(cfg, getenv)
	if err != nil {
		r.fail(err)
		return
	}
	for _, pc := range pcs {
		if !online {
			r.ok("identity provider %s (%s): not contacted; -online fetches its discovery document and keys", pc.ID, pc.Kind)
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		rep, err := idp.Probe(pctx, pc, idp.Options{Logger: sidecar.NewLogger(config.Log{Level: "error"}, io.Discard)})
		cancel()
		switch {
		case errors.Is(err, idp.ErrNothingToProbe):
			r.ok("identity provider %s (%s): nothing to fetch before a sign-in (no discovery, no id tokens)", pc.ID, pc.Kind)
		case err != nil:
			r.fail(fmt.Errorf("identity provider %s: %w", pc.ID, err))
		default:
			iss := "no RFC 9207 iss"
			if rep.IssParam {
				iss = "sends RFC 9207 iss"
			}
			r.ok("identity provider %s (%s): issuer %s, authorization %s, token %s, jwks %s (%s; %s), %s",
				pc.ID, pc.Kind, rep.Issuer, rep.AuthURL, rep.TokenURL, rep.JWKSURL, plural(rep.Keys, "key"), strings.Join(rep.Algs, " "), iss)
		}
	}
}
