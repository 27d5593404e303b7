package issuer

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// maxCookieValue bounds what we are willing to unescape and HMAC.
const maxCookieValue = 512

// signCookieValue is Better Auth's signed cookie format:
// encodeURIComponent(token + "." + base64std(HMAC-SHA256(secret, token))).
// url.QueryEscape equals encodeURIComponent on this alphabet.
func signCookieValue(secret []byte, token string) string {
	return url.QueryEscape(token + "." + cookieMAC(secret, token))
}

func cookieMAC(secret []byte, token string) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(token))
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// parseCookieValue returns the session token of a signed cookie value. A
// bad signature is treated as no cookie at all, as in Better Auth.
func parseCookieValue(secret []byte, raw string) (string, bool) {
	if raw == "" || len(raw) > maxCookieValue {
		return "", false
	}
	v, err := url.QueryUnescape(raw)
	if err != nil {
		return "", false
	}
	i := strings.LastIndexByte(v, '.')
	if i <= 0 {
		return "", false
	}
	token, sig := v[:i], v[i+1:]
	if len(sig) != 44 || sig[43] != '=' {
		return "", false
	}
	if !hmac.Equal([]byte(sig), []byte(cookieMAC(secret, token))) {
		return "", false
	}
	return token, true
}

// cookies knows the session cookie's name and attributes.
type cookies struct {
	secret   []byte
	name     string
	secure   bool
	sameSite http.SameSite
	// ba is a Better Auth application's session cookie, accepted after
	// ours (BetterAuthCookie): its name as sent, empty when none is, and
	// the secret that signs it.
	ba       string
	baSecret []byte
}

// withBetterAuth returns c accepting b's cookie too, "__Secure-"
// prefixed where ours is.
func (c cookies) withBetterAuth(b BetterAuthCookie, https bool) cookies {
	if !b.enabled() {
		return c
	}
	c.ba, c.baSecret = b.Name, b.Secret
	if https {
		c.ba = "__Secure-" + c.ba
	}
	return c
}

// token returns the session token from the first correctly signed cookie
// with our name. Several may arrive (a sibling subdomain can set one), and
// only a signed one can be ours.
func (c cookies) token(r *http.Request) (string, bool) {
	t, _, ok := c.tokenFrom(r)
	return t, ok
}

// tokenFrom is token, and says whether the token came from Better Auth's
// cookie (ours, when both are signed, wins): the session it names was
// imported with Better Auth's database, and get-session moves the
// browser onto our cookie.
func (c cookies) tokenFrom(r *http.Request) (token string, betterAuth, ok bool) {
	for _, ck := range r.CookiesNamed(c.name) {
		if t, ok := parseCookieValue(c.secret, ck.Value); ok {
			return t, false, true
		}
	}
	if c.ba == "" {
		return "", false, false
	}
	for _, ck := range r.CookiesNamed(c.ba) {
		if t, ok := parseCookieValue(c.baSecret, ck.Value); ok {
			return t, true, true
		}
	}
	return "", false, false
}

// names are the session cookies' names as sent: ours, and Better Auth's
// when it is accepted under another name.
func (c cookies) names() []string {
	if c.ba == "" || c.ba == c.name {
		return []string{c.name}
	}
	return []string{c.name, c.ba}
}

// set writes the session cookie. maxAge 0 makes a browser-session cookie
// (rememberMe:false).
func (c cookies) set(w http.ResponseWriter, token string, maxAge time.Duration) {
	http.SetCookie(w, &http.Cookie{
		Name:     c.name,
		Value:    signCookieValue(c.secret, token),
		Path:     "/",
		MaxAge:   int(maxAge / time.Second),
		HttpOnly: true,
		Secure:   c.secure,
		SameSite: c.sameSite,
	})
}

// clear expires the session cookie (Max-Age=0), and Better Auth's too
// when it is accepted: a signed-out browser holds neither.
func (c cookies) clear(w http.ResponseWriter) {
	for _, name := range c.names() {
		c.expire(w, name)
	}
}

// expire expires the cookie name.
func (c cookies) expire(w http.ResponseWriter, name string) {
	http.SetCookie(w, &http.Cookie{
		Name:     name,
		Value:    "",
		Path:     "/",
		MaxAge:   -1,
		HttpOnly: true,
		Secure:   c.secure,
		SameSite: c.sameSite,
	})
}
