package proxy

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// ParsePrefixes reads IPs and CIDRs (an IP is a one-address prefix).
func ParsePrefixes(entries []string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(entries))
	for _, e := range entries {
		if strings.Contains(e, "/") {
			p, err := netip.ParsePrefix(e)
			if err != nil {
				return nil, err
			}
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(e)
		if err != nil {
			return nil, err
		}
		out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
	}
	return out, nil
}

type trustedProxies []netip.Prefix

func (t trustedProxies) contains(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range t {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

func peerAddr(r *http.Request) (netip.Addr, bool) {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	a, err := netip.ParseAddr(host)
	return a.Unmap(), err == nil
}

// peerTrusted reports whether the TCP peer is one of the trusted proxies.
func (t trustedProxies) peerTrusted(r *http.Request) bool {
	if len(t) == 0 {
		return false
	}
	a, ok := peerAddr(r)
	return ok && t.contains(a)
}

// ClientIP returns the function that names a request's client: the TCP
// peer, unless the peer is a trusted proxy, in which case X-Forwarded-For
// is read from the right, skipping trusted hops, and the first address
// not trusted is the client. A client cannot dodge a rate limit by
// sending its own X-Forwarded-For: from an untrusted peer it is ignored.
func ClientIP(trusted []netip.Prefix) func(*http.Request) string {
	t := trustedProxies(trusted)
	return func(r *http.Request) string {
		a, ok := t.client(r)
		if !ok {
			return r.RemoteAddr
		}
		return a.String()
	}
}

// client is the address ClientIP names r's client by; false when the
// peer's address does not parse.
func (t trustedProxies) client(r *http.Request) (netip.Addr, bool) {
	peer, ok := peerAddr(r)
	if !ok || !t.contains(peer) {
		return peer, ok
	}
	hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
	for i := len(hops) - 1; i >= 0; i-- {
		a, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
		if err != nil {
			break // garbage from here on is the client's own writing
		}
		if !t.contains(a) {
			return a.Unmap(), true
		}
	}
	return peer, true
}

// hostAllowed checks the Host header against the configured names. An
// entry without a port admits any port.
func hostAllowed(allowed []string, host string) bool {
	if len(allowed) == 0 {
		return true
	}
	name := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		name = h
	}
	name = strings.TrimSuffix(strings.TrimPrefix(name, "["), "]")
	for _, a := range allowed {
		if strings.EqualFold(a, host) {
			return true
		}
		if _, _, err := net.SplitHostPort(a); err != nil && strings.EqualFold(strings.TrimSuffix(strings.TrimPrefix(a, "["), "]"), name) {
			return true
		}
	}
	return false
}
