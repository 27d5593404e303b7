package issuer

import (
	"context"
	"errors"
	"net/http"
	"time"
)

// afterHash gives the store work that follows a password hash its own
// time. The request's deadline (the proxy's store timeout) bounds waiting:
// for a hashing slot (acquire leaves storeReserve of it to the store) and
// for the database. The hash itself is CPU time, which a loaded host or a
// throttled container stretches past any deadline; the store work after
// it then gets at least storeReserve from now rather than what is left,
// so a slow hash does not end in a 503 "store unavailable" with its work
// thrown away. A client that goes away still cancels it. Call done when
// the request ends.
func afterHash(r *http.Request) (_ *http.Request, done func()) {
	ctx := r.Context()
	dl, ok := ctx.Deadline()
	if !ok || time.Until(dl) >= storeReserve {
		return r, func() {}
	}
	if err := ctx.Err(); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return r, func() {} // the client went away: nothing to extend
	}
	c, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeReserve)
	stop := context.AfterFunc(ctx, func() {
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			cancel()
		}
	})
	return r.WithContext(c), func() { stop(); cancel() }
}
