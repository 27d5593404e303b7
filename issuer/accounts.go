package issuer

import (
	"errors"
	"html/template"
	"net/http"
	"strings"
	"time"
)

// Account endpoints (Better Auth 1.7's shapes): list-accounts,
// unlink-account {accountId}, get-access-token {accountId}. accountId is
// the local account row's id, as in 1.7.

// freshAge is how recent a session must be to unlink an account (Better
// Auth's freshAge).
const freshAge = 24 * time.Hour

// refreshMargin: an access token expiring sooner is refreshed first.
const refreshMargin = 5 * time.Second

var (
	errAccountNotFound = errBadRequest("ACCOUNT_NOT_FOUND", "Account not found")
	errLastAccount     = errBadRequest("FAILED_TO_UNLINK_LAST_ACCOUNT", "You can't unlink your last account")
	errSessionNotFresh = &apiError{status: http.StatusForbidden, code: "SESSION_NOT_FRESH", message: "Session is not fresh"}
	errProviderNotSupp = errBadRequest("PROVIDER_NOT_SUPPORTED", "Provider not supported")
	errNoAccessToken   = errBadRequest("FAILED_TO_GET_ACCESS_TOKEN", "Failed to get a valid access token")
)

type accountJSON struct {
	AccountID  string   `json:"accountId"`
	ProviderID string   `json:"providerId"`
	UserID     string   `json:"userId"`
	CreatedAt  jsTime   `json:"createdAt"`
	UpdatedAt  jsTime   `json:"updatedAt"`
	ID         string   `json:"id"`
	Scopes     []string `json:"scopes"`
}

func scopesOf(a Account) []string {
	if a.Scope == "" {
		return []string{}
	}
	return strings.Split(a.Scope, ",")
}

// sessionUser resolves the session of a cookie-authenticated account
// request (a cookie-bearing POST passed the origin rule in ServeHTTP).
func (iss *Issuer) sessionUser(r *http.Request) (Session, User, *apiError) {
	s, u, found, _, err := iss.lookup(r.Context(), r, false)
	if err != nil {
		return Session{}, User{}, storeErr(err)
	}
	if !found {
		return Session{}, User{}, errUnauthorized
	}
	if iss.social.accounts == nil {
		return Session{}, User{}, errNotFound
	}
	return s, u, nil
}

// listAccounts is GET /list-accounts: the user's accounts, no tokens.
func (iss *Issuer) listAccounts(w http.ResponseWriter, r *http.Request) *apiError {
	_, u, apiErr := iss.sessionUser(r)
	if apiErr != nil {
		return apiErr
	}
	accts, err := iss.social.accounts.Accounts(r.Context(), u.ID)
	if err != nil {
		return storeErr(err)
	}
	out := make([]accountJSON, 0, len(accts))
	for _, a := range accts {
		out = append(out, accountJSON{AccountID: a.AccountID, ProviderID: a.ProviderID, UserID: a.UserID,
			CreatedAt: jsTime(a.CreatedAt), UpdatedAt: jsTime(a.UpdatedAt), ID: a.ID, Scopes: scopesOf(a)})
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, out)
	return nil
}

// unlinkAccount is POST /unlink-account {accountId}: never the last way
// to sign in. The provider's tokens are not revoked at the provider.
func (iss *Issuer) unlinkAccount(w http.ResponseWriter, r *http.Request) *apiError {
	s, u, apiErr := iss.sessionUser(r)
	if apiErr != nil {
		return apiErr
	}
	f, apiErr := readFields(w, r, iss.bodyBytes, false)
	if apiErr != nil {
		return apiErr
	}
	id, _ := f.str("accountId", true)
	if apiErr := f.err(); apiErr != nil {
		return apiErr
	}
	if iss.now().Sub(s.CreatedAt) > freshAge {
		return errSessionNotFresh
	}
	switch err := iss.social.accounts.DeleteAccount(r.Context(), u.ID, id); {
	case errors.Is(err, ErrNotFound):
		return errAccountNotFound
	case errors.Is(err, ErrLastAccount):
		return errLastAccount
	case err != nil:
		return storeErr(err)
	}
	writeJSON(w, http.StatusOK, struct {
		Status bool `json:"status"`
	}{true})
	return nil
}

// getAccessToken is POST /get-access-token {accountId}: the provider's
// access token for one of the user's accounts, refreshed first when it
// is about to expire and a refresh token is held.
func (iss *Issuer) getAccessToken(w http.ResponseWriter, r *http.Request) *apiError {
	_, u, apiErr := iss.sessionUser(r)
	if apiErr != nil {
		return apiErr
	}
	f, apiErr := readFields(w, r, iss.bodyBytes, false)
	if apiErr != nil {
		return apiErr
	}
	// Better Auth's schema is strict: accountId, or useAccountCookie
	// (an account cookie this sidecar does not set), and nothing else.
	for k := range f.m {
		if k != "accountId" && k != "useAccountCookie" {
			return errBadRequest("VALIDATION_ERROR", "[body] Invalid input")
		}
	}
	id, has := f.str("accountId", false)
	if apiErr := f.err(); apiErr != nil {
		return apiErr
	}
	if !has {
		return errAccountNotFound
	}
	ctx := r.Context()
	accts, err := iss.social.accounts.Accounts(ctx, u.ID)
	if err != nil {
		return storeErr(err)
	}
	var a Account
	for _, x := range accts {
		if x.ID == id {
			a = x
		}
	}
	if a.ID == "" {
		return errAccountNotFound
	}
	p := iss.providers[a.ProviderID]
	if p == nil {
		return errProviderNotSupp
	}
	sc := iss.social
	access, err1 := sc.openToken(a.ID, "access_token", a.AccessToken)
	refresh, err2 := sc.openToken(a.ID, "refresh_token", a.RefreshToken)
	idToken, err3 := sc.openToken(a.ID, "id_token", a.IDToken)
	if err := errors.Join(err1, err2, err3); err != nil {
		// Sealed under another AUTH_SECRET: the user must sign in again.
		iss.log.Warn("get-access-token: stored provider tokens do not open", "provider", a.ProviderID, "error", err.Error())
		return errNoAccessToken
	}
	expiring := !a.AccessTokenExpiresAt.IsZero() && a.AccessTokenExpiresAt.Before(iss.now().Add(refreshMargin))
	if (access == "" || expiring) && refresh != "" {
		t, err := p.Refresh(ctx, refresh)
		if err != nil {
			iss.log.Info("get-access-token: refresh failed", "provider", a.ProviderID, "error", err.Error())
			return errNoAccessToken
		}
		if t.IDToken == "" {
			t.IDToken = idToken
		}
		next, err := sc.withTokens(a, t)
		if err != nil {
			return errInternal(err)
		}
		next.UpdatedAt = iss.now().UTC().Truncate(timeUnit)
		if err := sc.accounts.UpdateAccount(ctx, next, Session{}, false); err != nil {
			return storeErr(err)
		}
		a, access, idToken = next, t.AccessToken, t.IDToken
	} else if access == "" || expiring {
		return errNoAccessToken
	}
	var exp *jsTime
	if !a.AccessTokenExpiresAt.IsZero() {
		t := jsTime(a.AccessTokenExpiresAt)
		exp = &t
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, struct {
		AccessToken          string   `json:"accessToken"`
		AccessTokenExpiresAt *jsTime  `json:"accessTokenExpiresAt,omitempty"`
		Scopes               []string `json:"scopes"`
		IDToken              string   `json:"idToken,omitempty"`
	}{access, exp, scopesOf(a), idToken})
	return nil
}

// errorPageTmpl is Better Auth's default error page, where callback
// failures land when the flow named no errorCallbackURL.
var errorPageTmpl = template.Must(template.New("error").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Sign-in failed</title></head>
<body style="font-family: system-ui, sans-serif; max-width: 36rem; margin: 4rem auto; padding: 0 1rem">
<h1>Sign-in failed</h1>
<p>The sign-in could not be completed: <code>{{.Code}}</code></p>
{{if .Desc}}<p>{{.Desc}}</p>{{end}}
<p><a href="/">Back</a></p>
</body></html>
`))

// errorPage is GET /error?error=<code>&error_description=<text>: 200
// text/html, every value escaped.
func (iss *Issuer) errorPage(w http.ResponseWriter, r *http.Request) *apiError {
	q := r.URL.Query()
	code, _ := oauthErrorCode(q.Get("error"), 64)
	desc, _ := oauthErrorCode(q.Get("error_description"), 256)
	if code == "" {
		code = "unknown"
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		errorPageTmpl.Execute(w, struct{ Code, Desc string }{code, desc})
	}
	return nil
}
