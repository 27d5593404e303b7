package proxy

import (
	"net/http"
	"net/netip"
)

// IdentityHeaders is identityHeaders for the external tests.
var IdentityHeaders = identityHeaders

// UpstreamInUse is the number of upstream slots a NewUpstream pool has
// taken now.
func UpstreamInUse(rt http.RoundTripper) int { return len(rt.(*boundedTransport).slots) }

// ClientCounter is the counter of the upstream's per-client share that
// a client address (grouped by v6Bits) is counted on.
func ClientCounter(addr string, v6Bits int) int {
	return int(clientKey(groupClient(netip.MustParseAddr(addr), v6Bits)) & (clientCounters - 1))
}
