package issuer

import (
	"errors"
	"net/http"
	"strings"
)

// The idToken variants of sign-in/social and link-social: a client that
// already holds an id token from the provider (a mobile SDK, Google One
// Tap) signs in, or links, without a redirect. The token is verified as
// the callback's is (signature against the provider's keys, iss, aud,
// azp, exp, iat; nonce when the client gives one), then the same rules
// apply.

// verifyIDToken verifies q's id token, counting and mapping failures to
// Better Auth's JSON errors.
func (iss *Issuer) verifyIDToken(r *http.Request, q socialRequest) (Identity, *apiError) {
	ident, err := q.provider.VerifyIDToken(r.Context(), q.idToken.Token, q.idToken.Nonce)
	if err != nil {
		apiErr, result := errIDTokenFailure(err)
		iss.metrics.social.WithLabelValues(q.provider.ID(), result).Inc()
		iss.log.Info("id token refused", "provider", q.provider.ID(), "code", apiErr.code, "error", err.Error())
		return Identity{}, apiErr
	}
	ident.Tokens.AccessToken, ident.Tokens.RefreshToken = q.idToken.AccessToken, q.idToken.RefreshToken
	return ident, nil
}

func errIDTokenFailure(err error) (*apiError, string) {
	switch {
	case errors.Is(err, ErrIDTokenUnsupported):
		return errIDTokenNotSupported, socialInvalid
	case errors.Is(err, ErrInvalidIDToken):
		return errInvalidIDToken, socialInvalid
	case errors.Is(err, ErrIdentityRefused):
		return errFailedUserInfo, socialRefused
	case errors.Is(err, ErrUserInfo):
		return errFailedUserInfo, socialInvalid
	case errors.Is(err, ErrProviderUnavailable):
		// The keys could not be read: no token can be judged now.
		return errProviderDown, socialUnavailable
	}
	return errInternal(err), socialError
}

func (iss *Issuer) signInIDToken(w http.ResponseWriter, r *http.Request, q socialRequest) *apiError {
	ident, apiErr := iss.verifyIDToken(r, q)
	if apiErr != nil {
		return apiErr
	}
	id := q.provider.ID()
	if ident.Email == "" {
		iss.metrics.social.WithLabelValues(id, socialRefused).Inc()
		return errUserEmailNotFound
	}
	res, fail := iss.resolveSocial(r, q.provider, ident)
	if fail != nil {
		iss.metrics.social.WithLabelValues(id, fail.result).Inc()
		iss.log.Info("id token sign-in refused", "provider", id, "code", fail.code)
		switch {
		case fail.code == "email_not_verified":
			return errEmailNotVerified
		case fail.result == socialError:
			return storeErr(fail.cause)
		}
		return &apiError{status: http.StatusUnauthorized, code: "OAUTH_LINK_ERROR", message: strings.ReplaceAll(fail.code, "_", " ")}
	}
	iss.metrics.social.WithLabelValues(id, socialSuccess).Inc()
	iss.setSessionCookie(w, res.session)
	writeJSON(w, http.StatusOK, struct {
		Redirect bool     `json:"redirect"`
		Token    string   `json:"token"`
		User     userJSON `json:"user"`
	}{false, res.session.Token, toUserJSON(res.user)})
	return nil
}

func (iss *Issuer) linkIDToken(w http.ResponseWriter, r *http.Request, q socialRequest, u User) *apiError {
	ident, apiErr := iss.verifyIDToken(r, q)
	if apiErr != nil {
		return apiErr
	}
	if fail := iss.link(r.Context(), q.provider, u, ident); fail != nil {
		iss.metrics.social.WithLabelValues(q.provider.ID(), fail.result).Inc()
		switch fail.code {
		case "email_not_verified":
			return errLinkNeedsVerifiedEmail
		case "email_does_not_match":
			return &apiError{status: http.StatusUnauthorized, code: "LINKING_DIFFERENT_EMAILS_NOT_ALLOWED", message: "Account not linked - different emails not allowed"}
		case "account_already_linked_to_different_user":
			return &apiError{status: http.StatusConflict, code: "SOCIAL_ACCOUNT_ALREADY_LINKED", message: "Social account already linked"}
		case "unable_to_link_account":
			if fail.result == socialRefused {
				return &apiError{status: http.StatusUnauthorized, code: "LINKING_NOT_ALLOWED", message: "Linking not allowed"}
			}
		}
		return storeErr(fail.cause)
	}
	iss.metrics.social.WithLabelValues(q.provider.ID(), socialSuccess).Inc()
	writeJSON(w, http.StatusOK, struct {
		URL      string `json:"url"`
		Status   bool   `json:"status"`
		Redirect bool   `json:"redirect"`
	}{"", true, false})
	return nil
}
