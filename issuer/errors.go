package issuer

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
)

// apiError is an error with what the client may see (status, code,
// message) kept apart from the cause, which only the log sees.
type apiError struct {
	status  int
	code    string
	message string
	cause   error
}

func (e *apiError) Error() string {
	if e.cause != nil {
		return e.code + ": " + e.cause.Error()
	}
	return e.code + ": " + e.message
}

func (e *apiError) Unwrap() error { return e.cause }

func errBadRequest(code, msg string) *apiError {
	return &apiError{status: http.StatusBadRequest, code: code, message: msg}
}

// errInternal hides the cause from the client.
func errInternal(cause error) *apiError {
	return &apiError{status: http.StatusInternalServerError, code: "INTERNAL_SERVER_ERROR", message: "Internal server error", cause: cause}
}

// errUnavailable is a database that does not answer: retryable, and never
// a reason to let a request through unchecked.
func errUnavailable(cause error) *apiError {
	return &apiError{status: http.StatusServiceUnavailable, code: "SERVICE_UNAVAILABLE", message: "Authentication store unavailable", cause: cause}
}

// hashErr answers a hashing failure: overload (every slot busy until the
// request deadline) is 503 with Retry-After, the client may retry at once;
// anything else is internal.
func hashErr(w http.ResponseWriter, err error) *apiError {
	if errors.Is(err, errHashBusy) {
		w.Header().Set("Retry-After", "1")
		return errBusy
	}
	return errInternal(err)
}

var (
	errBusy               = &apiError{status: http.StatusServiceUnavailable, code: "SERVICE_UNAVAILABLE", message: "Too many password checks at once; retry shortly", cause: errHashBusy}
	errInvalidCredentials = &apiError{status: http.StatusUnauthorized, code: "INVALID_EMAIL_OR_PASSWORD", message: "Invalid email or password"}
	errUnauthorized       = &apiError{status: http.StatusUnauthorized, code: "UNAUTHORIZED", message: "Unauthorized"}
	errUserExists         = &apiError{status: http.StatusUnprocessableEntity, code: "USER_ALREADY_EXISTS_USE_ANOTHER_EMAIL", message: "User already exists. Use another email."}
	errPasswordTooShort   = errBadRequest("PASSWORD_TOO_SHORT", "Password too short")
	errPasswordTooLong    = errBadRequest("PASSWORD_TOO_LONG", "Password too long")
	errInvalidEmail       = errBadRequest("INVALID_EMAIL", "Invalid email")
	errInvalidPassword    = errBadRequest("INVALID_PASSWORD", "Invalid password")
	errBadJSON            = errBadRequest("BAD_REQUEST", "Invalid JSON in request body")
	errNotFound           = &apiError{status: http.StatusNotFound, code: "NOT_FOUND", message: "Not found"}
	errBodyTooLarge       = &apiError{status: http.StatusRequestEntityTooLarge, code: "PAYLOAD_TOO_LARGE", message: "Request body too large"}
	errInvalidOrigin      = &apiError{status: http.StatusForbidden, code: "INVALID_ORIGIN", message: "Invalid origin"}
	errInvalidCallback    = &apiError{status: http.StatusForbidden, code: "INVALID_CALLBACK_URL", message: "Invalid callbackURL"}
)

type errorBody struct {
	Message string `json:"message"`
	Code    string `json:"code"`
}

// WriteError writes the JSON error body every rejection carries.
func WriteError(w http.ResponseWriter, status int, code, message string) {
	writeJSON(w, status, errorBody{Message: message, Code: code})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"message":"Internal server error","code":"INTERNAL_SERVER_ERROR"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	w.Write(b)
}
