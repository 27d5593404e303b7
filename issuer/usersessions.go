package issuer

import (
	"net/http"
)

// The session endpoints a signed-in user calls, in Better Auth 1.7's
// shapes: list-sessions, revoke-session, revoke-sessions and
// revoke-other-sessions. Ending a session revokes the JWTs minted from it
// in the same transaction; revoke-sessions revokes every JWT of the user
// issued up to now, those of sessions that ended before included.

// listSessions returns the user's live sessions (Better Auth's shape,
// tokens included: revoke-session takes one). The session asking must be
// under a day old (403 SESSION_NOT_FRESH), as Better Auth's
// freshSessionMiddleware demands.
func (iss *Issuer) listSessions(w http.ResponseWriter, r *http.Request) *apiError {
	s, u, apiErr := iss.signedIn(r)
	if apiErr != nil {
		return apiErr
	}
	if !iss.fresh(s) {
		return errSessionNotFresh
	}
	ss, err := iss.store.Sessions(r.Context(), u.ID, iss.stamp())
	if err != nil {
		return storeErr(err)
	}
	out := make([]sessionJSON, len(ss))
	for i, s := range ss {
		out[i] = toSessionJSON(s)
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, out)
	return nil
}

// revokeSession ends the user's session with {token} and revokes its
// JWTs. A token that is not one of the user's sessions changes nothing
// and answers the same.
func (iss *Issuer) revokeSession(w http.ResponseWriter, r *http.Request) *apiError {
	f, apiErr := readFields(w, r, iss.bodyBytes, false)
	if apiErr != nil {
		return apiErr
	}
	token, _ := f.str("token", true)
	if apiErr := f.err(); apiErr != nil {
		return apiErr
	}
	s, u, apiErr := iss.signedIn(r)
	if apiErr != nil {
		return apiErr
	}
	if len(token) <= maxTokenBytes {
		if _, err := iss.store.EndSession(r.Context(), token, u.ID, true, iss.stamp()); err != nil {
			return storeErr(err)
		}
	}
	if token == s.Token {
		iss.cookies.clear(w)
	}
	return writeStatus(w)
}

// revokeSessions ends every session of the user, this one included, and
// revokes every JWT of the user issued up to now: sign-out everywhere.
func (iss *Issuer) revokeSessions(w http.ResponseWriter, r *http.Request) *apiError {
	if _, apiErr := readFields(w, r, iss.bodyBytes, false); apiErr != nil {
		return apiErr
	}
	_, u, apiErr := iss.signedIn(r)
	if apiErr != nil {
		return apiErr
	}
	n, err := iss.store.EndSessions(r.Context(), u.ID, "", true, iss.stamp())
	if err != nil {
		return storeErr(err)
	}
	iss.log.Info("signed out everywhere", "user_id", u.ID, "sessions_ended", n)
	iss.cookies.clear(w)
	return writeStatus(w)
}

// revokeOtherSessions ends every other session of the user and revokes
// the JWTs minted from each; this session and its JWTs go on.
func (iss *Issuer) revokeOtherSessions(w http.ResponseWriter, r *http.Request) *apiError {
	if _, apiErr := readFields(w, r, iss.bodyBytes, false); apiErr != nil {
		return apiErr
	}
	s, u, apiErr := iss.signedIn(r)
	if apiErr != nil {
		return apiErr
	}
	if _, err := iss.store.EndSessions(r.Context(), u.ID, s.Token, false, iss.stamp()); err != nil {
		return storeErr(err)
	}
	return writeStatus(w)
}

// writeStatus answers Better Auth's {"status":true}.
func writeStatus(w http.ResponseWriter) *apiError {
	writeJSON(w, http.StatusOK, struct {
		Status bool `json:"status"`
	}{true})
	return nil
}
