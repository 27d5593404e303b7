package issuer

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"
)

// callbackParams are the callback's query parameters that mean anything;
// others (scope, authuser, session_state, ...) are ignored.
type callbackParams struct {
	code, state, err, errDesc, iss string
	hasIss                         bool
}

// maxCallbackQuery bounds the callback's query: a code and a state are a
// few hundred bytes.
const maxCallbackQuery = 8 << 10

// parseCallbackQuery reads the callback's parameters from a raw query (or
// form body). A parameter given twice, an undecodable one, invalid UTF-8
// or a query over maxCallbackQuery is no callback at all: two readings
// of one request are how checks get bypassed.
func parseCallbackQuery(raw string) (callbackParams, bool) {
	var p callbackParams
	if len(raw) > maxCallbackQuery {
		return p, false
	}
	vals, err := url.ParseQuery(raw)
	if err != nil {
		return p, false
	}
	for _, k := range []struct {
		name string
		dst  *string
	}{{"code", &p.code}, {"state", &p.state}, {"error", &p.err}, {"error_description", &p.errDesc}, {"iss", &p.iss}} {
		v, ok := vals[k.name]
		if !ok {
			continue
		}
		if len(v) != 1 || !utf8.ValidString(v[0]) {
			return callbackParams{}, false
		}
		*k.dst = v[0]
	}
	_, p.hasIss = vals["iss"]
	if len(p.encode()) > maxCallbackQuery {
		// The bound holds for the query the form_post bounce sends too,
		// whose escaping can be longer than what came (a space as "+"
		// but "^" as "%5E"): otherwise a form_post accepted here would
		// be bounced to a callback refused as too long.
		return callbackParams{}, false
	}
	return p, true
}

// encode is p as a query, for the form_post bounce.
func (p callbackParams) encode() string {
	v := url.Values{}
	for _, kv := range [][2]string{{"code", p.code}, {"state", p.state}, {"error", p.err}, {"error_description", p.errDesc}} {
		if kv[1] != "" {
			v.Set(kv[0], kv[1])
		}
	}
	if p.hasIss {
		v.Set("iss", p.iss)
	}
	return v.Encode()
}

// oauthErrorCode keeps a provider's error code when it is one (RFC 6749
// §4.1.2.1: printable ASCII without '"' and '\'), at most 64 bytes.
func oauthErrorCode(s string, limit int) (string, bool) {
	if s == "" || len(s) > limit {
		return "", false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return "", false
		}
	}
	return s, true
}

// withError appends error (and error_description) to loc's query, before
// any fragment, keeping a relative loc relative, as Better Auth does.
func withError(loc, code, desc string) string {
	frag := ""
	if i := strings.IndexByte(loc, '#'); i >= 0 {
		loc, frag = loc[:i], loc[i:]
	}
	sep := "?"
	if strings.Contains(loc, "?") {
		sep = "&"
	}
	q := "error=" + url.QueryEscape(code)
	if desc != "" {
		q += "&error_description=" + url.QueryEscape(desc)
	}
	return loc + sep + q + frag
}

// Social sign-in results, the "result" label of
// authsidecar_social_signins_total.
const (
	socialSuccess     = "success"
	socialState       = "state_invalid"        // no, unknown, spent, expired or foreign state
	socialDenied      = "denied"               // the provider sent error= (the user said no)
	socialInvalid     = "invalid"              // code refused, id token that does not verify, issuer mismatch
	socialRefused     = "refused"              // the provider's or the linking rules said no
	socialUnavailable = "provider_unavailable" // the provider did not answer usably
	socialError       = "error"                // our store or code failed
)

// callbackFail is a callback failure: Better Auth's error code, our
// result class, and the cause for the log.
type callbackFail struct {
	code, result string
	desc         string
	cause        error
}

// callback serves GET and POST /callback/{id}. It always answers with a
// redirect: to the flow's callback URL on success, else to an error URL
// with ?error=<Better Auth's code>.
func (iss *Issuer) callback(w http.ResponseWriter, r *http.Request, id string) {
	label := "unknown" // attacker-chosen ids must not make series
	if _, ok := iss.providers[id]; ok {
		label = id
	}
	defaultErr := iss.origin + BasePath + "/error"
	switch r.Method {
	case http.MethodGet:
	case http.MethodPost:
		iss.callbackPost(w, r, id, defaultErr)
		return
	default:
		w.Header().Set("Allow", "GET, POST")
		iss.fail(w, r, &apiError{status: http.StatusMethodNotAllowed, code: "METHOD_NOT_ALLOWED", message: "Method not allowed"})
		return
	}
	p, ok := parseCallbackQuery(r.URL.RawQuery)
	if !ok {
		iss.callbackFailed(w, label, defaultErr, callbackFail{code: "invalid_callback_request", result: socialState})
		return
	}
	if p.state == "" {
		iss.callbackFailed(w, label, defaultErr, callbackFail{code: "state_not_found", result: socialState})
		return
	}
	ctx := r.Context()
	hash := stateHash(p.state)
	var st OAuthState
	var err error
	if iss.social.accounts != nil {
		st, err = iss.social.accounts.OAuthState(ctx, hash)
	} else {
		err = ErrNotFound
	}
	switch {
	case errors.Is(err, ErrNotFound):
		iss.callbackFailed(w, label, defaultErr, callbackFail{code: "state_mismatch", result: socialState, cause: errors.New("no such flow (unknown, spent or swept)")})
		return
	case err != nil:
		iss.callbackFailed(w, label, defaultErr, callbackFail{code: "internal_server_error", result: socialError, cause: err})
		return
	}
	f, err := iss.social.openFlow(st)
	if err != nil {
		iss.callbackFailed(w, label, defaultErr, callbackFail{code: "state_mismatch", result: socialState, cause: err})
		return
	}
	errURL := defaultErr
	if f.ErrorURL != "" {
		errURL = f.ErrorURL
	}
	// Only the browser that started the flow holds the signed state
	// cookie. Another's failure leaves the flow for the right one.
	if cs, ok := iss.cookieState(r); !ok || cs != p.state || f.ProviderID != id {
		iss.callbackFailed(w, label, errURL, callbackFail{code: "state_mismatch", result: socialState, cause: errors.New("the state cookie is missing or another flow's, or the flow is another provider's")})
		return
	}
	// Spent from here on, whatever follows.
	iss.stateCookie(w, "", 0)
	if err := iss.social.accounts.TakeOAuthState(ctx, hash); err != nil {
		fail := callbackFail{code: "state_mismatch", result: socialState, cause: errors.New("flow spent by a concurrent callback")}
		if !errors.Is(err, ErrNotFound) {
			fail = callbackFail{code: "internal_server_error", result: socialError, cause: err}
		}
		iss.callbackFailed(w, label, errURL, fail)
		return
	}
	if !iss.now().Before(time.UnixMilli(f.ExpiresAt)) {
		iss.callbackFailed(w, label, errURL, callbackFail{code: "state_mismatch", result: socialState, cause: errors.New("flow expired")})
		return
	}
	if p.err != "" {
		code, ok := oauthErrorCode(p.err, 64)
		if !ok {
			code = "invalid_callback_request"
		}
		desc, _ := oauthErrorCode(p.errDesc, 256)
		iss.callbackFailed(w, label, errURL, callbackFail{code: code, desc: desc, result: socialDenied})
		return
	}
	if p.code == "" {
		iss.callbackFailed(w, label, errURL, callbackFail{code: "no_code", result: socialInvalid})
		return
	}
	prov := iss.providers[id]
	if prov == nil {
		iss.callbackFailed(w, label, errURL, callbackFail{code: "oauth_provider_not_found", result: socialError, cause: errors.New("provider removed since the flow began")})
		return
	}
	if err := prov.CheckIssuer(ctx, p.iss, p.hasIss); err != nil {
		iss.callbackFailed(w, label, errURL, providerFail(err))
		return
	}
	if prov.UsesNonce() && f.Nonce == "" {
		iss.callbackFailed(w, label, errURL, callbackFail{code: "nonce_binding_missing", result: socialInvalid})
		return
	}
	ident, err := prov.Exchange(ctx, CodeExchange{Code: p.code, Verifier: f.Verifier, RedirectURI: iss.redirectURI(id), Nonce: f.Nonce})
	if err != nil {
		iss.callbackFailed(w, label, errURL, providerFail(err))
		return
	}
	if ident.AccountID == "" {
		iss.callbackFailed(w, label, errURL, callbackFail{code: "unable_to_get_user_info", result: socialInvalid, cause: errors.New("no subject")})
		return
	}
	if f.Link != nil {
		if fail := iss.linkCallback(r, prov, f.Link, ident); fail != nil {
			iss.callbackFailed(w, label, errURL, *fail)
			return
		}
		iss.metrics.social.WithLabelValues(label, socialSuccess).Inc()
		redirect(w, orDefault(f.CallbackURL, iss.origin))
		return
	}
	if ident.Email == "" {
		iss.callbackFailed(w, label, errURL, callbackFail{code: "email_not_found", result: socialRefused})
		return
	}
	res, fail := iss.resolveSocial(r, prov, ident)
	if fail != nil {
		iss.callbackFailed(w, label, errURL, *fail)
		return
	}
	iss.setSessionCookie(w, res.session)
	iss.metrics.social.WithLabelValues(label, socialSuccess).Inc()
	to := orDefault(f.CallbackURL, iss.origin)
	if res.isNew && f.NewUserURL != "" {
		to = f.NewUserURL
	}
	redirect(w, to)
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// providerFail maps a provider's error to Better Auth's callback code.
func providerFail(err error) callbackFail {
	switch {
	case errors.Is(err, ErrIssuerMismatch):
		return callbackFail{code: "issuer_mismatch", result: socialInvalid, cause: err}
	case errors.Is(err, ErrCodeRejected):
		return callbackFail{code: "invalid_code", result: socialInvalid, cause: err}
	case errors.Is(err, ErrIdentityRefused):
		return callbackFail{code: "unable_to_get_user_info", result: socialRefused, cause: err}
	case errors.Is(err, ErrUserInfo):
		return callbackFail{code: "unable_to_get_user_info", result: socialInvalid, cause: err}
	case errors.Is(err, ErrProviderUnavailable):
		// Better Auth's code for a failed exchange, whatever its cause.
		return callbackFail{code: "invalid_code", result: socialUnavailable, cause: err}
	}
	return callbackFail{code: "internal_server_error", result: socialError, cause: err}
}

// callbackFailed redirects to errURL with the code, counts and logs it.
func (iss *Issuer) callbackFailed(w http.ResponseWriter, label, errURL string, f callbackFail) {
	iss.metrics.social.WithLabelValues(label, f.result).Inc()
	attrs := []any{"provider", label, "code", f.code, "result", f.result}
	if f.cause != nil {
		attrs = append(attrs, "error", f.cause.Error())
	}
	switch f.result {
	case socialUnavailable, socialError:
		iss.log.Warn("sign-in with an identity provider failed", attrs...)
	default:
		iss.log.Info("sign-in with an identity provider refused", attrs...)
	}
	redirect(w, withError(errURL, f.code, f.desc))
}

// callbackPost bounces a form_post callback to GET with the same
// parameters: the state cookie is SameSite=Lax, so only the top-level GET
// that follows carries it. The POST itself reads nothing and changes
// nothing, so it needs no origin check (the provider's page is another
// site's, by design).
func (iss *Issuer) callbackPost(w http.ResponseWriter, r *http.Request, id, defaultErr string) {
	body, apiErr := readFields(w, r, iss.bodyBytes, true)
	if apiErr != nil {
		redirect(w, withError(defaultErr, "invalid_callback_request", ""))
		return
	}
	form := url.Values{}
	for k, raw := range body.m {
		var s string
		if jsonKind(raw) == "string" {
			s, _ = body.str(k, false)
			form.Set(k, s)
		}
	}
	q := r.URL.RawQuery
	if enc := form.Encode(); enc != "" {
		if q != "" {
			q = enc + "&" + q
		} else {
			q = enc
		}
	}
	p, ok := parseCallbackQuery(q)
	if !ok {
		redirect(w, withError(defaultErr, "invalid_callback_request", ""))
		return
	}
	redirect(w, iss.origin+BasePath+"/callback/"+url.PathEscape(id)+"?"+p.encode())
}
