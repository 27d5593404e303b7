package issuer

// Redirect rules: where a link or a flow may send the browser, and the
// origin a cookie-bearing request must come from.

import (
	"net/http"
	"net/url"
	"strings"
)

// redirect answers 302 as Better Auth does (JSON content type, empty
// body), never cached, and with no Referer leaving the page: the URL may
// hold a token.
func redirect(w http.ResponseWriter, loc string) {
	h := w.Header()
	h.Set("Location", loc)
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "no-referrer")
	w.WriteHeader(http.StatusFound)
}

// withParam resolves ref against base and sets key=value in its query,
// replacing earlier values of key and keeping the other pairs in order
// (what URLSearchParams.set does).
func withParam(base, ref, key, value string) (string, error) {
	b, err := url.Parse(base)
	if err != nil {
		return "", err
	}
	u, err := url.Parse(ref)
	if err != nil {
		return "", err
	}
	u = b.ResolveReference(u)
	var kept []string
	if u.RawQuery != "" {
		for _, pair := range strings.Split(u.RawQuery, "&") {
			k, _, _ := strings.Cut(pair, "=")
			if uk, err := url.QueryUnescape(k); err == nil && uk == key {
				continue
			}
			kept = append(kept, pair)
		}
	}
	kept = append(kept, url.QueryEscape(key)+"="+url.QueryEscape(value))
	u.RawQuery = strings.Join(kept, "&")
	u.ForceQuery = false
	return u.String(), nil
}

// safeRedirect admits what a redirect may go to: a path on this origin or
// an absolute URL on a trusted origin. It refuses what browsers would read
// as another host: "//host", "/\host", "https:host", userinfo, encoded
// slashes and backslashes, control bytes and raw non-ASCII.
func (iss *Issuer) safeRedirect(s string) bool {
	if s == "" {
		return true
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x21 || c >= 0x7f || c == '\\' {
			return false
		}
	}
	if s[0] == '/' {
		if len(s) > 1 && s[1] == '/' {
			return false
		}
		// An encoded slash or backslash in the path may be decoded by
		// whatever serves it into "//host" (Better Auth refuses them too).
		path := s
		if i := strings.IndexAny(s, "?#"); i >= 0 {
			path = s[:i]
		}
		l := strings.ToLower(path)
		return !strings.Contains(l, "%2f") && !strings.Contains(l, "%5c")
	}
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok || (scheme != "http" && scheme != "https") {
		return false
	}
	authority := rest
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		authority = rest[:i]
	}
	if authority == "" || strings.ContainsAny(authority, "@%") {
		return false
	}
	u, err := url.Parse(s)
	if err != nil || u.User != nil || u.Opaque != "" || u.Host != authority {
		return false
	}
	return iss.trusted[scheme+"://"+strings.ToLower(authority)]
}
