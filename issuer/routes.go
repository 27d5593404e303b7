package issuer

import (
	"net/http"
	"sort"
	"strings"
)

type handlerFunc func(w http.ResponseWriter, r *http.Request) *apiError

// routeTable binds the handlers to iss: a copy made by Reload needs its
// own table, or it would serve with the original's settings.
func (iss *Issuer) routeTable() map[string]map[string]handlerFunc {
	return map[string]map[string]handlerFunc{
		"/sign-up/email":   {http.MethodPost: iss.signUp},
		"/sign-in/email":   {http.MethodPost: iss.signIn},
		"/get-session":     {http.MethodGet: iss.getSession, http.MethodHead: iss.getSession, http.MethodPost: iss.getSession},
		"/token":           {http.MethodGet: iss.token},
		"/jwks":            {http.MethodGet: iss.jwks, http.MethodHead: iss.jwks},
		"/sign-out":        {http.MethodPost: iss.signOut},
		"/change-password": {http.MethodPost: iss.changePassword},

		"/list-sessions":         {http.MethodGet: iss.listSessions},
		"/revoke-session":        {http.MethodPost: iss.revokeSession},
		"/revoke-sessions":       {http.MethodPost: iss.revokeSessions},
		"/revoke-other-sessions": {http.MethodPost: iss.revokeOtherSessions},
		"/update-user":           {http.MethodPost: iss.updateUser},
		"/change-email":          {http.MethodPost: iss.changeEmail},
		"/delete-user":           {http.MethodPost: iss.deleteUser},
		"/ok":                    {http.MethodGet: iss.ok, http.MethodHead: iss.ok},

		"/request-password-reset":  {http.MethodPost: iss.requestPasswordReset},
		"/reset-password":          {http.MethodPost: iss.resetPassword},
		"/send-verification-email": {http.MethodPost: iss.sendVerificationEmail},
		"/verify-email":            {http.MethodGet: iss.verifyEmail},
		resetPagePath:              {http.MethodGet: iss.resetPageGet, http.MethodPost: iss.resetPagePost},

		"/sign-in/social":   {http.MethodPost: iss.signInSocial},
		"/link-social":      {http.MethodPost: iss.linkSocial},
		"/list-accounts":    {http.MethodGet: iss.listAccounts},
		"/unlink-account":   {http.MethodPost: iss.unlinkAccount},
		"/get-access-token": {http.MethodPost: iss.getAccessToken},
		"/error":            {http.MethodGet: iss.errorPage, http.MethodHead: iss.errorPage},
	}
}

// ServeHTTP routes /api/auth/* by hand: ServeMux would answer unknown
// methods with plain-text 405s and redirect unclean paths, and every
// answer here must be JSON.
func (iss *Issuer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	sub, ok := strings.CutPrefix(r.URL.Path, BasePath)
	if !ok || (sub != "" && sub[0] != '/') {
		iss.fail(w, r, errNotFound)
		return
	}
	methods, ok := iss.routes[sub]
	if !ok {
		// GET /reset-password/{token} and /callback/{provider}: the routes
		// with a parameter.
		if tok, found := strings.CutPrefix(sub, "/reset-password/"); found && tok != "" && !strings.Contains(tok, "/") {
			methods = map[string]handlerFunc{http.MethodGet: func(w http.ResponseWriter, r *http.Request) *apiError {
				return iss.resetPasswordCallback(w, r, tok)
			}}
		} else if id, found := strings.CutPrefix(sub, "/callback/"); found && id != "" && !strings.Contains(id, "/") {
			// Served whole here, cross-site POST included: the identity
			// provider's form_post is one, and it is only bounced to GET.
			// Its body is read under the same deadline as any other.
			iss.bodyDeadline(w, r)
			iss.callback(w, r, id)
			return
		} else {
			iss.fail(w, r, errNotFound)
			return
		}
	}
	h, ok := methods[r.Method]
	if !ok {
		allow := make([]string, 0, len(methods))
		for m := range methods {
			allow = append(allow, m)
		}
		sort.Strings(allow)
		w.Header().Set("Allow", strings.Join(allow, ", "))
		iss.fail(w, r, &apiError{status: http.StatusMethodNotAllowed, code: "METHOD_NOT_ALLOWED", message: "Method not allowed"})
		return
	}
	// The client's turn in the hashing queue: the key its per-IP limits
	// use, so one address (or IPv6 prefix) cannot starve the others.
	r = r.WithContext(withHashClient(r.Context(), clientKey(iss.clientIP(r), iss.v6Bits)))
	iss.bodyDeadline(w, r)
	// Cross-site protection for every state-changing request, before
	// anything is read or changed (origin.go).
	var apiErr *apiError
	if apiErr = iss.originCheck(r, sub); apiErr != nil {
		iss.log.Info("cross-origin request refused", "path", logPath(r.URL.Path), "code", apiErr.code,
			"origin", r.Header.Get("Origin"), "sec_fetch_site", r.Header.Get("Sec-Fetch-Site"))
	} else {
		if hashes[sub] {
			r = withStoreBudget(r)
		}
		apiErr = h(w, r)
	}
	switch sub {
	case "/sign-in/email":
		switch apiErr {
		case errRateLimited:
			iss.metrics.signins.WithLabelValues("rate_limited").Inc()
		case errLockedOut:
			iss.metrics.signins.WithLabelValues("locked_out").Inc()
		default:
			iss.metrics.signins.WithLabelValues(result(apiErr)).Inc()
		}
	case "/sign-up/email":
		if apiErr == errRateLimited {
			iss.metrics.signups.WithLabelValues("rate_limited").Inc()
			break
		}
		iss.metrics.signups.WithLabelValues(result(apiErr)).Inc()
	case "/request-password-reset", "/reset-password", "/send-verification-email", "/verify-email":
		iss.metrics.recovery.WithLabelValues(sub[1:], recoveryResult(apiErr)).Inc()
	}
	if apiErr != nil {
		iss.fail(w, r, apiErr)
	}
}

// logPath keeps a reset link's token out of log lines: opening the link
// does not spend it.
func logPath(p string) string {
	if tok, ok := strings.CutPrefix(p, BasePath+"/reset-password/"); ok && tok != "" {
		return BasePath + "/reset-password/[token]"
	}
	return p
}

func (iss *Issuer) fail(w http.ResponseWriter, r *http.Request, e *apiError) {
	if e == errBusy {
		// Overload, answered: a warning, not an error per request.
		iss.log.Warn("password hashing busy until the request deadline; answered 503", "path", logPath(r.URL.Path))
	} else if e.cause != nil {
		iss.log.Error("auth request failed", "path", logPath(r.URL.Path), "code", e.code, "error", e.cause.Error())
	}
	WriteError(w, e.status, e.code, e.message)
}
