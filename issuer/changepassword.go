package issuer

import (
	"net/http"
)

// changePassword replaces the password of the cookie session's user after
// checking the current one (checkPassword: limited per IP and per user);
// revokeOtherSessions signs out every other session. Issued JWTs stay
// valid (docs/protocol.md).
func (iss *Issuer) changePassword(w http.ResponseWriter, r *http.Request) *apiError {
	f, apiErr := readFields(w, r, iss.bodyBytes, false)
	if apiErr != nil {
		return apiErr
	}
	current, _ := f.str("currentPassword", true)
	next, _ := f.str("newPassword", true)
	revoke := f.boolean("revokeOtherSessions", false)
	if apiErr := f.err(); apiErr != nil {
		return apiErr
	}
	s, u, found, _, err := iss.lookup(r.Context(), r, false)
	if err != nil {
		return storeErr(err)
	}
	if !found {
		return errUnauthorized
	}
	if apiErr := iss.checkPasswordLength(next); apiErr != nil {
		return apiErr
	}
	if apiErr := iss.checkPassword(w, r, u.ID, current); apiErr != nil {
		return apiErr
	}
	newHash, err := iss.hasher.hash(r.Context(), next)
	if err != nil {
		return hashErr(w, err)
	}
	r, done := afterHash(r)
	defer done()
	if err := iss.store.SetPassword(r.Context(), u.ID, newHash, iss.now().UTC().Truncate(timeUnit)); err != nil {
		return storeErr(err)
	}
	if revoke {
		if err := iss.store.DeleteOtherSessions(r.Context(), u.ID, s.Token); err != nil {
			return storeErr(err)
		}
	}
	writeJSON(w, http.StatusOK, struct {
		Token *string  `json:"token"`
		User  userJSON `json:"user"`
	}{nil, toUserJSON(u)})
	return nil
}
