package proxy

import (
	"errors"
	"hash/maphash"
	"net/http"
	"net/netip"
	"sync/atomic"
	"time"
)

// errClientShare: the request's client already has its share of the
// upstream connections in use or waiting. The answer is 503 with
// Retry-After, as when every connection is busy.
var errClientShare = errors.New("upstream: this client holds its share of the connections")

// clientCounters is the size of clientShare's table: a power of two.
const clientCounters = 4096

// clientShare bounds the upstream requests one client has in flight or
// waiting for a connection, so that no single source can take every
// connection (slowly sent bodies, answers read slowly, or just many
// requests) while others wait.
//
// It is a fixed table of counters indexed by a hash of the client (its
// IPv4 address, or its IPv6 prefix): one atomic add per request, no lock,
// no map, no allocation, and nothing to sweep. Two clients whose hashes
// fall on one counter share one bound: stricter for both, never looser
// for anyone. A client shares its counter with a given other client with
// a probability of 1/4096: an honest client shares a flooding client's
// bound (and is refused while the flood holds it) one time in 4096 per
// flooding source. The hash is keyed by a seed drawn at start, so no
// client can choose to land on another's counter.
type clientShare struct {
	max    int32 // zero: no bound
	counts [clientCounters]atomic.Int32
}

// take counts a request of the client whose key is key (0: unknown, not
// counted) and returns the counter to give back, or -1 for none; false
// when the client already holds its share.
func (s *clientShare) take(key uint64) (int, bool) {
	if s.max == 0 || key == 0 {
		return -1, true
	}
	i := int(key & (clientCounters - 1))
	if s.counts[i].Add(1) > s.max {
		s.counts[i].Add(-1)
		return -1, false
	}
	return i, true
}

// give returns what take counted.
func (s *clientShare) give(i int) {
	if i >= 0 {
		s.counts[i].Add(-1)
	}
}

// clientSeed keys the clients' hashes for this process.
var clientSeed = maphash.MakeSeed()

// clientKey is the key clientShare counts a client under: a hash of its
// address as groupClient leaves it, never 0 (0 is no client).
func clientKey(a netip.Addr) uint64 {
	b := a.As16()
	if h := maphash.Bytes(clientSeed, b[:]); h != 0 {
		return h
	}
	return 1
}

// groupClient is the address every per-client bound counts a's requests
// under, as the issuer's rate limits do (limits.ipv6_prefix): an IPv4
// address as itself (an IPv4-mapped IPv6 address is its IPv4 address), an
// IPv6 address as the first address of its prefix of v6Bits bits, since
// one client (a home router, a phone, a VM) holds a whole /64.
func groupClient(a netip.Addr, v6Bits int) netip.Addr {
	a = a.Unmap().WithZone("")
	if a.Is6() && v6Bits > 0 && v6Bits < 128 {
		if p, err := a.Prefix(v6Bits); err == nil {
			return p.Addr()
		}
	}
	return a
}

// clientOf is the clientShare key of r's client (ClientIP's address,
// grouped), or 0 when its peer address does not parse, and the address.
func (p *Proxy) clientOf(r *http.Request) (uint64, netip.Addr) {
	a, ok := trustedProxies(p.o.TrustedProxies).client(r)
	if !ok {
		return 0, netip.Addr{}
	}
	return clientKey(groupClient(a, p.o.IPv6Prefix)), a
}

// shareWarnEvery spaces the warnings of clients refused for their share.
const shareWarnEvery = time.Minute

// warnClientShare logs, at most once per shareWarnEvery, that a client
// was refused for holding its share of the upstream connections, with
// the likely cause when the address is not a client at all: a load
// balancer or an ingress in front of the sidecar, not listed in
// proxy.trusted_proxies, makes every user one client that may hold only
// the share (docs/limits.md).
func (p *Proxy) warnClientShare(info *RequestInfo) {
	now := time.Now().UnixNano()
	last := p.shareWarned.Load()
	if now-last < int64(shareWarnEvery) || !p.shareWarned.CompareAndSwap(last, now) {
		return
	}
	p.log.Warn("a client holds its share of the upstream connections (proxy.upstream_client_share): its further requests get 503 until some end; if it is a load balancer or an ingress, list it in proxy.trusted_proxies",
		"client", info.clientAddr.String(), "trusted_proxies", len(p.o.TrustedProxies))
}
