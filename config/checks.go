package config

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
)

// This file holds the checks of single values; validate.go says which value
// gets which check.

// checkListen checks a listen address: host:port with a numeric port. An
// empty host means all interfaces; port 0 picks a free port.
func checkListen(s string) error {
	_, port, err := net.SplitHostPort(s)
	if err != nil {
		var ae *net.AddrError
		if errors.As(err, &ae) {
			err = errors.New(ae.Err)
		}
		return fmt.Errorf("%q is not host:port (e.g. 127.0.0.1:8080): %v", s, err)
	}
	if !isPort(port, 0) {
		return fmt.Errorf("%q: port must be a number from 0 to 65535", s)
	}
	return nil
}

// isPort reports whether s is a decimal port number from min to 65535.
// Service names ("http") are refused: they depend on /etc/services.
func isPort(s string, min int) bool {
	if s == "" || strings.Trim(s, "0123456789") != "" {
		return false
	}
	n, err := strconv.Atoi(s)
	return err == nil && n >= min && n <= 65535
}

var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func checkEnvName(s string) error {
	if !envNameRE.MatchString(s) {
		return fmt.Errorf("must be an environment variable name like AUTH_SECRET, got %q", s)
	}
	return nil
}

// isToken reports whether s is an RFC 9110 token (section 5.6.2), the syntax
// of both header names and (RFC 6265 section 4.1.1) cookie names.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

func checkCookieName(s string) error {
	if !isToken(s) {
		return fmt.Errorf("%q is not a valid cookie name: use letters, digits and !#$%%&'*+-.^_`|~ (RFC 6265)", s)
	}
	// Case-insensitive because browsers match the prefixes that way
	// (RFC 6265bis section 4.1.3).
	for _, prefix := range []string{"__Secure-", "__Host-"} {
		if len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix) {
			return fmt.Errorf("%q must not start with %q: the \"__Secure-\" prefix is added automatically when base_url is https", s, prefix)
		}
	}
	return nil
}

// reservedHeaders are headers the proxy reads or sets itself; carrying the
// user id in one of them would corrupt the request or let a client forge it.
var reservedHeaders = map[string]bool{
	"authorization": true, "proxy-authorization": true, "cookie": true, "set-cookie": true,
	"host": true, "origin": true, "content-length": true, "content-type": true,
	"transfer-encoding": true, "te": true, "trailer": true, "connection": true,
	"keep-alive": true, "proxy-connection": true, "upgrade": true, "forwarded": true,
	"x-forwarded-for": true, "x-forwarded-host": true, "x-forwarded-proto": true,
	"x-real-ip": true, "set-auth-jwt": true,
}

func checkIdentityHeader(s string) error {
	if !isToken(s) {
		return fmt.Errorf("%q is not a valid header name: use letters, digits and !#$%%&'*+-.^_`|~ (RFC 9110)", s)
	}
	if reservedHeaders[strings.ToLower(s)] {
		return fmt.Errorf("%q is a header the proxy itself relies on; pick a dedicated name such as X-User-Id", s)
	}
	return nil
}

// checkStripHeader checks a proxy.strip_headers entry: a valid name, and
// not a header forwarding itself needs.
func checkStripHeader(s string) error {
	if !isToken(s) {
		return fmt.Errorf("%q is not a valid header name: use letters, digits and !#$%%&'*+-.^_`|~ (RFC 9110)", s)
	}
	switch strings.ToLower(s) {
	case "host", "authorization", "content-length", "content-type", "transfer-encoding", "cookie":
		return fmt.Errorf("%q cannot be stripped: requests need it", s)
	}
	return nil
}

// checkRoutePath checks a route entry. Request paths are cleaned before they
// are matched, so an entry with "..", "//", a query or a fragment could never
// match; entries are lowercase so that a rule compared against a case-folded
// path cannot be sidestepped by writing /API/Admin/.
func checkRoutePath(s string) error {
	switch {
	case s == "":
		return errors.New("must not be empty")
	case s[0] != '/':
		return fmt.Errorf(`%q must start with "/"`, s)
	case strings.Contains(s, ".."):
		return fmt.Errorf(`%q must not contain ".."`, s)
	case strings.Contains(s, "//"):
		return fmt.Errorf(`%q must not contain "//"`, s)
	case strings.ContainsAny(s, "?#"):
		return fmt.Errorf(`%q must not contain "?" or "#": routes match the path only`, s)
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c <= ' ' || c == 0x7f:
			return fmt.Errorf("%q must not contain whitespace or control characters", s)
		case c >= 0x80 || 'A' <= c && c <= 'Z':
			return fmt.Errorf("%q must be lowercase ASCII", s)
		}
	}
	return nil
}

func checkAdminPrefix(s string) error {
	if err := checkRoutePath(s); err != nil {
		return err
	}
	if !strings.HasPrefix(s, "/api/") {
		return fmt.Errorf(`%q must be under "/api/", where role checks apply`, s)
	}
	return nil
}

var roleRE = regexp.MustCompile(`^[a-z0-9_-]+$`)

func checkRole(s string) error {
	if !roleRE.MatchString(s) {
		return fmt.Errorf("%q is not a role name: use lowercase letters, digits, _ and -", s)
	}
	return nil
}

// checkIPOrCIDR checks a trusted proxy entry: an address or a prefix in
// canonical form (no host bits set, which usually means a typo in the mask).
func checkIPOrCIDR(s string) error {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return fmt.Errorf("%q is not an IP or CIDR (e.g. 10.0.0.0/8 or 192.0.2.1)", s)
		}
		if p.Masked() != p {
			return fmt.Errorf("%q has host bits set; did you mean %s?", s, p.Masked())
		}
		return nil
	}
	if _, err := netip.ParseAddr(s); err != nil {
		return fmt.Errorf("%q is not an IP or CIDR (e.g. 10.0.0.0/8 or 192.0.2.1)", s)
	}
	return nil
}

var hostnameRE = regexp.MustCompile(`^[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*$`)

// checkHost checks an allowed Host header value: a host name or IP address,
// optionally with a port.
func checkHost(s string) error {
	switch {
	case s == "":
		return errors.New("must not be empty")
	case strings.Contains(s, "*"):
		return fmt.Errorf("%q: wildcards are not supported; list each host", s)
	case strings.Contains(s, "/"):
		return fmt.Errorf("%q must be a host name, optionally with :port, not a URL", s)
	}
	host := s
	switch {
	case strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]"):
		host = s[1 : len(s)-1]
	case strings.Contains(s, ":"):
		h, port, err := net.SplitHostPort(s)
		if err != nil || !isPort(port, 1) {
			return fmt.Errorf("%q: want host or host:port with a port from 1 to 65535 (IPv6 addresses in brackets)", s)
		}
		host = h
	}
	if strings.Contains(host, ":") || strings.HasPrefix(s, "[") {
		if a, err := netip.ParseAddr(host); err != nil || !a.Is6() || !strings.HasPrefix(s, "[") {
			return fmt.Errorf("%q: want an IPv6 address in brackets, like [2001:db8::1]:8080", s)
		}
		return nil
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return nil
	}
	if !hostnameRE.MatchString(host) {
		return fmt.Errorf("%q is not a valid host name", s)
	}
	return nil
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
