package issuer

import (
	"net/http"
	"net/url"
)

var errCrossSiteLogin = &apiError{status: http.StatusForbidden, code: "CROSS_SITE_NAVIGATION_LOGIN_BLOCKED", message: "Cross-site navigation login blocked. This request appears to be a CSRF attack."}

// originCheck is Better Auth's CSRF defence for a request to sub (the
// path under BasePath), before any handler runs:
//   - GET, HEAD and OPTIONS change nothing and pass;
//   - a request carrying any Cookie must name a trusted origin in Origin,
//     else Referer (requestOrigin): a browser attaches the session cookie
//     to a cross-site form post, and only the origin tells it apart;
//   - sign-in and sign-up without cookies follow its formCsrfMiddleware
//     (formOrigin): they set the cookie, so a login-CSRF is refused;
//   - any other request without cookies passes unless it comes from
//     another site (Go's CrossOriginProtection: Sec-Fetch-Site, else
//     Origin against Host), as before; curl and servers send neither.
func (iss *Issuer) originCheck(r *http.Request, sub string) *apiError {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return nil
	}
	if _, ok := r.Header["Cookie"]; ok {
		return iss.requestOrigin(r)
	}
	if sub == "/sign-in/email" || sub == "/sign-up/email" {
		return iss.formOrigin(r)
	}
	if iss.csrf.Check(r) != nil {
		return errInvalidOrigin
	}
	return nil
}

// formOrigin is Better Auth's formCsrfMiddleware for a request without
// cookies: a browser (it sends Sec-Fetch-*) must name a trusted origin,
// and may not sign in by a cross-site navigation (a form posted to us
// from another site); a client naming an origin must name a trusted one;
// a client naming neither (curl) passes.
func (iss *Issuer) formOrigin(r *http.Request) *apiError {
	site, mode, dest := r.Header.Get("Sec-Fetch-Site"), r.Header.Get("Sec-Fetch-Mode"), r.Header.Get("Sec-Fetch-Dest")
	if site != "" || mode != "" || dest != "" {
		if site == "cross-site" && mode == "navigate" {
			return errCrossSiteLogin
		}
		return iss.requestOrigin(r)
	}
	if r.Header.Get("Origin") != "" || r.Header.Get("Referer") != "" {
		return iss.requestOrigin(r)
	}
	return nil
}

// requestOrigin requires Origin, else Referer's origin, to be present,
// not "null", and trusted.
func (iss *Issuer) requestOrigin(r *http.Request) *apiError {
	o := r.Header.Get("Origin")
	if o == "" {
		if ref, err := url.Parse(r.Header.Get("Referer")); err == nil && ref.Host != "" {
			o = ref.Scheme + "://" + ref.Host
		}
	}
	if o == "" || o == "null" {
		return errMissingOrigin
	}
	if !iss.trusted[o] {
		return errInvalidOrigin
	}
	return nil
}
