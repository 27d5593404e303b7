package idp

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	"golang.org/x/oauth2"

	"github.com/authsidecar/authsidecar/issuer"
)

// getJSON reads a JSON resource of the provider with the user's access
// token: userinfo, GitHub's /user and /user/emails. A 5xx, no answer in
// time or a body that is too large or not JSON is ErrProviderUnavailable;
// another non-200 (the token refused) is ErrUserInfo.
func (b *base) getJSON(ctx context.Context, endpoint, url, accessToken string, v any) error {
	req, err := http.NewRequestWithContext(at(ctx, endpoint), http.MethodGet, url, nil)
	if err != nil {
		return errorf(issuer.ErrProviderUnavailable, "%s: %v", endpoint, err)
	}
	req.Header.Set("Authorization", "Bearer "+accessToken)
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "authsidecar")
	res, err := b.client.Do(req)
	if err != nil {
		return errorf(issuer.ErrProviderUnavailable, "%s: %v", endpoint, err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	switch {
	case err != nil:
		return errorf(issuer.ErrProviderUnavailable, "%s: read: %v", endpoint, err)
	case res.StatusCode >= 500:
		return errorf(issuer.ErrProviderUnavailable, "%s: status %d", endpoint, res.StatusCode)
	case res.StatusCode != http.StatusOK:
		return errorf(issuer.ErrUserInfo, "%s: status %d", endpoint, res.StatusCode)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return errorf(issuer.ErrProviderUnavailable, "%s: not JSON: %v", endpoint, err)
	}
	return nil
}

// classify maps a token request's failure: the provider refusing the
// code or refresh token (a 4xx, or GitHub's 200 with an error member) is
// ErrCodeRejected; anything else (no answer, a 5xx, a body too large or
// not a token response) is ErrProviderUnavailable. Only the error code
// and status go into the message: never a body.
func classify(err error) error {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) && re.Response != nil {
		if re.Response.StatusCode >= 500 {
			return errorf(issuer.ErrProviderUnavailable, "token endpoint: status %d", re.Response.StatusCode)
		}
		return errorf(issuer.ErrCodeRejected, "token endpoint: status %d, error %q", re.Response.StatusCode, clip(re.ErrorCode))
	}
	return errorf(issuer.ErrProviderUnavailable, "token endpoint: %v", err)
}

// providerTokens reads a token response: expiries from expires_in and
// refresh_token_expires_in (now-based, not x/oauth2's clock), scopes
// from scope (spaces, or GitHub's commas).
func providerTokens(tok *oauth2.Token, idToken string, now time.Time) issuer.ProviderTokens {
	t := issuer.ProviderTokens{AccessToken: tok.AccessToken, RefreshToken: tok.RefreshToken, IDToken: idToken}
	if tok.ExpiresIn > 0 {
		t.AccessTokenExpiresAt = now.Add(time.Duration(tok.ExpiresIn) * time.Second)
	} else if !tok.Expiry.IsZero() {
		t.AccessTokenExpiresAt = tok.Expiry
	}
	if n, ok := tok.Extra("refresh_token_expires_in").(float64); ok && n > 0 {
		t.RefreshTokenExpiresAt = now.Add(time.Duration(n) * time.Second)
	}
	if s, ok := tok.Extra("scope").(string); ok {
		t.Scopes = strings.FieldsFunc(s, func(r rune) bool { return r == ' ' || r == ',' })
	}
	return t
}

// refresh trades a refresh token for new tokens. A refresh token the
// provider did not replace is kept; so is the id token only if a new one
// came (the caller keeps the old one otherwise).
func refresh(ctx context.Context, conf *oauth2.Config, client *http.Client, refreshToken string, now time.Time) (issuer.ProviderTokens, error) {
	ctx = context.WithValue(at(ctx, endpointToken), oauth2.HTTPClient, client)
	tok, err := conf.TokenSource(ctx, &oauth2.Token{RefreshToken: refreshToken, Expiry: time.Unix(1, 0)}).Token()
	if err != nil {
		return issuer.ProviderTokens{}, classify(err)
	}
	raw, _ := tok.Extra("id_token").(string)
	t := providerTokens(tok, raw, now)
	if t.RefreshToken == "" {
		t.RefreshToken = refreshToken
	}
	return t, nil
}

// isRefusal reports an answer of the provider that refused the request
// (ErrUserInfo from getJSON), as opposed to no usable answer at all.
func isRefusal(err error) bool { return errors.Is(err, issuer.ErrUserInfo) }
