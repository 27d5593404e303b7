package issuer

import (
	"context"
	"errors"
	"net/http"
	"time"
)

// The request's deadline (the proxy's store timeout) bounds waiting: for
// a hashing slot (acquire leaves storeReserve of it to the store) and for
// the database. A password hash is CPU time, which a loaded host or a
// throttled container stretches past any deadline; it must not eat the
// store's time. So a request that hashes notes its budget as it arrives
// (withStoreBudget), and the store work after the hash gets that whole
// budget again (afterHash), instead of what the hash left: a slow hash no
// longer ends in a 503 "store unavailable" with its work thrown away. A
// stuck store still answers 503, one budget after the hash.

type budgetKey struct{}

// hashes lists the routes whose handlers hash a password.
var hashes = map[string]bool{
	"/sign-up/email": true, "/sign-in/email": true, "/change-password": true,
	"/reset-password": true, resetPagePath: true,
}

// withStoreBudget notes, for afterHash, how long r's deadline gives the
// store from now.
func withStoreBudget(r *http.Request) *http.Request {
	dl, ok := r.Context().Deadline()
	if !ok {
		return r
	}
	return r.WithContext(context.WithValue(r.Context(), budgetKey{}, time.Until(dl)))
}

// afterHash returns r with a deadline the noted budget from now, at least
// storeReserve, for the store work that follows a hash. A client that
// goes away still cancels it. Call done when the request ends.
func afterHash(r *http.Request) (_ *http.Request, done func()) {
	ctx := r.Context()
	if _, ok := ctx.Deadline(); !ok {
		return r, func() {}
	}
	if err := ctx.Err(); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return r, func() {} // the client went away: nothing to extend
	}
	budget, _ := ctx.Value(budgetKey{}).(time.Duration)
	c, cancel := context.WithTimeout(context.WithoutCancel(ctx), max(budget, storeReserve))
	stop := context.AfterFunc(ctx, func() {
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			cancel()
		}
	})
	return r.WithContext(c), func() { stop(); cancel() }
}
