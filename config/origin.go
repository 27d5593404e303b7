package config

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// BaseOrigin returns the origin of BaseURL, scheme://host[:port], serialized
// the way browsers do (lowercase host, no default port), so it compares
// equal to Origin headers. It is the JWT iss and aud. It returns "" if
// BaseURL does not parse, which Validate reports.
func (c Config) BaseOrigin() string {
	u, err := url.Parse(c.BaseURL)
	if err != nil || u.Host == "" {
		return ""
	}
	host := strings.TrimSuffix(strings.ToLower(u.Host), ":")
	if p := u.Port(); p != "" && p == defaultPort(u.Scheme) {
		host = strings.TrimSuffix(host, ":"+p)
	}
	return u.Scheme + "://" + host
}

// Secure reports whether BaseURL is https, which makes cookies Secure and
// adds the "__Secure-" prefix to the cookie name.
func (c Config) Secure() bool {
	u, err := url.Parse(c.BaseURL)
	return err == nil && u.Scheme == "https"
}

func defaultPort(scheme string) string {
	switch scheme {
	case "http":
		return "80"
	case "https":
		return "443"
	}
	return ""
}

// checkHTTPURL checks that s is an absolute http or https URL with a host,
// and without userinfo, query or fragment, none of which means anything for
// a base or upstream URL. A path is allowed.
func checkHTTPURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("%q is not a URL: %v", s, unwrapURLError(err))
	}
	switch {
	case (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return fmt.Errorf("must be an absolute http or https URL like https://app.example.com, got %q", s)
	case u.User != nil:
		return fmt.Errorf("must not contain userinfo (user@ or user:password@), got %q", s)
	case u.RawQuery != "" || u.ForceQuery:
		return fmt.Errorf("must not have a query, got %q", s)
	case u.Fragment != "":
		return fmt.Errorf("must not have a fragment, got %q", s)
	}
	return nil
}

// checkSecureURL wants an absolute http(s) URL that is https, or plain
// http only to a loopback address: what travels to it (why) must not
// cross a network in clear text.
func checkSecureURL(s, why string) error {
	if err := checkHTTPURL(s); err != nil {
		return err
	}
	u, _ := url.Parse(s)
	if u.Scheme == "http" && !isLoopbackHost(u.Host) {
		return fmt.Errorf("%q: plain http is only allowed to a loopback address (%s); use https", s, why)
	}
	return nil
}

// checkOrigin checks that s is written exactly as a browser would send it in
// an Origin header; any other spelling would never match one.
func checkOrigin(s string) error {
	if strings.Contains(s, "*") {
		return fmt.Errorf("%q: wildcards are not supported; list each origin", s)
	}
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("%q is not a URL: %v", s, unwrapURLError(err))
	}
	switch {
	case !strings.HasPrefix(s, "http://") && !strings.HasPrefix(s, "https://"):
		return fmt.Errorf("%q: want an origin like https://app.example.com (http or https, lowercase)", s)
	case u.Host == "":
		return fmt.Errorf("%q: missing host", s)
	case u.User != nil:
		return fmt.Errorf("%q: must not contain userinfo", s)
	case u.RawQuery != "" || u.ForceQuery:
		return fmt.Errorf("%q: must not have a query", s)
	case u.Fragment != "":
		return fmt.Errorf("%q: must not have a fragment", s)
	case u.Path == "/":
		return fmt.Errorf("%q: must not end with a slash (an Origin header never does)", s)
	case u.Path != "" || u.RawPath != "":
		return fmt.Errorf("%q: must not have a path (an origin is scheme://host[:port])", s)
	case strings.HasSuffix(u.Host, ":"):
		return fmt.Errorf("%q: drop the empty port after the colon", s)
	case !isASCII(u.Host):
		return fmt.Errorf("%q: host must be ASCII; write an internationalized name in punycode (xn--...), as browsers send it", s)
	case u.Host != strings.ToLower(u.Host):
		return fmt.Errorf("%q: host must be lowercase (browsers lowercase it in the Origin header)", s)
	case u.Port() != "" && u.Port() == defaultPort(u.Scheme):
		return fmt.Errorf("%q: drop the default port :%s (browsers omit it from the Origin header)", s, u.Port())
	case s != u.Scheme+"://"+u.Host:
		return fmt.Errorf("%q: want exactly scheme://host[:port]", s)
	}
	return nil
}

// unwrapURLError drops url.Error's `parse "..."` prefix, since callers quote
// the value themselves.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
