package proxy

import (
	"context"
	"net/http"
	"net/netip"
)

// RequestInfo is what the proxy learned about a request, for the access
// log and metrics that wrap it.
type RequestInfo struct {
	Class  Class
	UserID string   // set once authenticated
	Reason string   // failure reason when refused
	path   string   // canonical path, forwarded as is
	token  bool     // a ?token= to strip before forwarding
	bearer bool     // authenticated by the Authorization header
	roles  []string // an admin route's roles
	// tunnel, on a websocket-class upgrade, ends the tunnel with the token
	// that opened it.
	tunnel *wsTunnel
	// client is the clientShare key of the request's client, set when it
	// is forwarded (0: not counted); clientAddr the address it stands for.
	client     uint64
	clientAddr netip.Addr
	// body is the forwarded request's body under the minimum rate.
	body *slowBody
	// slow is CloseReasonSlowBody or CloseReasonSlowRead when the proxy
	// ended the request for a client too slow.
	slow string
}

// CloseReason is why the proxy itself ended the request: its client sent
// the body or took the answer too slowly (CloseReasonSlowBody,
// CloseReasonSlowRead), or it closed the request's WebSocket tunnel
// (CloseReasonNotWebSocket, CloseReasonTokenExpired,
// CloseReasonTokenRevoked); "" when the peers or a shutdown ended it.
// Read it once the handler has returned.
func (i *RequestInfo) CloseReason() string {
	switch {
	case i.slow != "":
		return i.slow
	case i.tunnel == nil:
		return ""
	case i.tunnel.broken.Load():
		return CloseReasonNotWebSocket
	case i.tunnel.expired.Load() && i.tunnel.revoked.Load():
		return CloseReasonTokenRevoked
	case i.tunnel.expired.Load():
		return CloseReasonTokenExpired
	}
	return ""
}

type infoKey struct{}

// WithInfo returns r with a fresh RequestInfo in its context, so a
// middleware outside the proxy can read what the proxy recorded.
func WithInfo(r *http.Request) (*http.Request, *RequestInfo) {
	c := &infoContext{Context: r.Context()}
	return r.WithContext(c), &c.info
}

// infoContext carries a RequestInfo in the same allocation as the context
// node (context.WithValue would take a second one). Done, Err and the
// parent's values pass through, so cancellation propagates as usual.
type infoContext struct {
	context.Context
	info RequestInfo
}

func (c *infoContext) Value(key any) any {
	if _, ok := key.(infoKey); ok {
		return &c.info
	}
	return c.Context.Value(key)
}

// WithClass returns ctx carrying a RequestInfo of class c, for store
// queries that serve no request (the revocation poller's), so the query
// metric counts them apart.
func WithClass(ctx context.Context, c Class) context.Context {
	return context.WithValue(ctx, infoKey{}, &RequestInfo{Class: c})
}

// Info returns the request's RequestInfo, or nil.
func Info(ctx context.Context) *RequestInfo {
	info, _ := ctx.Value(infoKey{}).(*RequestInfo)
	return info
}

// UserID returns the verified user id of the request, or "".
func UserID(ctx context.Context) string {
	if info := Info(ctx); info != nil {
		return info.UserID
	}
	return ""
}
