package issuer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/authsidecar/authsidecar/internal/strictjson"
)

// fields is a decoded request body: a JSON object whose members are kept
// raw until a handler asks for them with a type, so type errors can be
// reported the way Better Auth's zod schemas report them.
type fields struct {
	m        map[string]json.RawMessage
	problems []string
}

// readFields reads the whole body (up to limit), checks its media type and
// decodes it strictly. allowForm admits application/x-www-form-urlencoded
// (sign-in and sign-up accept it). An empty body is an empty object.
func readFields(w http.ResponseWriter, r *http.Request, limit int64, allowForm bool) (*fields, *apiError) {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, errBodyTooLarge
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return nil, errBodyTimeout
		}
		return nil, &apiError{status: http.StatusBadRequest, code: "BAD_REQUEST", message: "Could not read request body", cause: err}
	}
	mt := ""
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err = mime.ParseMediaType(ct)
		if err != nil {
			return nil, errUnsupportedType(ct, allowForm)
		}
	}
	switch {
	case mt == "application/json":
		return decodeJSONFields(data)
	case mt == "application/x-www-form-urlencoded" && allowForm:
		return decodeFormFields(data)
	case mt == "" && len(bytes.TrimSpace(data)) == 0:
		return &fields{m: map[string]json.RawMessage{}}, nil
	default:
		return nil, errUnsupportedType(r.Header.Get("Content-Type"), allowForm)
	}
}

var errBodyTimeout = &apiError{status: http.StatusRequestTimeout, code: "REQUEST_TIMEOUT", message: "Request body not received in time"}

// bodyDeadline bounds the time to read r's body: the connection's read
// deadline is set bodyTimeout from now, so a body that never arrives ends
// in 408 (readFields) and the connection is closed. net/http clears the
// deadline itself once the body has been read to its end (it starts
// reading the connection for the next request then), so the rest of the
// handler (a hash waiting for its slot) is not cut short: TestBodyReadTimeout
// holds it to that. A request without a body sets nothing: that
// background read has already begun, and a deadline would end it.
// Bodies of forwarded routes never come here: the proxy holds them to
// its minimum rate (proxy.body_min_rate).
func (iss *Issuer) bodyDeadline(w http.ResponseWriter, r *http.Request) {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return
	}
	// The network's clock, not the injected one: this is an I/O deadline.
	// A writer that is not a connection net/http serves (a test recorder)
	// has nothing to bound.
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(iss.bodyTimeout))
}

func errUnsupportedType(ct string, allowForm bool) *apiError {
	allowed := "application/json"
	if allowForm {
		allowed = "application/x-www-form-urlencoded, application/json"
	}
	return &apiError{
		status:  http.StatusUnsupportedMediaType,
		code:    "UNSUPPORTED_MEDIA_TYPE",
		message: fmt.Sprintf("Content-Type %q is not allowed. Allowed types: %s", ct, allowed),
	}
}

// decodeJSONFields accepts exactly one JSON object in valid UTF-8 with no
// duplicate member names at any depth and nothing after it. Duplicates are
// refused because two parsers reading the same body differently is how
// validation gets bypassed.
func decodeJSONFields(data []byte) (*fields, *apiError) {
	if len(bytes.TrimSpace(data)) == 0 {
		return &fields{m: map[string]json.RawMessage{}}, nil
	}
	if !utf8.Valid(data) || !json.Valid(data) {
		return nil, errBadJSON
	}
	if err := strictjson.CheckDuplicates(data); err != nil {
		return nil, errBadRequest("BAD_REQUEST", "Invalid JSON in request body: "+err.Error())
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil || m == nil {
		kind := jsonKind(bytes.TrimSpace(data))
		return nil, errBadRequest("VALIDATION_ERROR", "[body] Invalid input: expected object, received "+kind)
	}
	return &fields{m: m}, nil
}

// decodeFormFields turns a urlencoded body into string members. A repeated
// name is refused for the same reason as duplicate JSON members.
func decodeFormFields(data []byte) (*fields, *apiError) {
	if !utf8.Valid(data) {
		return nil, errBadRequest("BAD_REQUEST", "Invalid form body")
	}
	vals, err := url.ParseQuery(string(data))
	if err != nil {
		return nil, errBadRequest("BAD_REQUEST", "Invalid form body")
	}
	m := make(map[string]json.RawMessage, len(vals))
	for k, v := range vals {
		if len(v) != 1 {
			return nil, errBadRequest("BAD_REQUEST", fmt.Sprintf("Invalid form body: %q given more than once", k))
		}
		if !utf8.ValidString(v[0]) {
			return nil, errBadRequest("BAD_REQUEST", "Invalid form body")
		}
		raw, _ := json.Marshal(v[0])
		// Forms carry only strings; booleans arrive as "true"/"false".
		if v[0] == "true" || v[0] == "false" {
			raw = json.RawMessage(v[0])
		}
		m[k] = raw
	}
	return &fields{m: m}, nil
}

func jsonKind(raw []byte) string {
	if len(raw) == 0 {
		return "undefined"
	}
	switch raw[0] {
	case '"':
		return "string"
	case '{':
		return "object"
	case '[':
		return "array"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	default:
		return "number"
	}
}

func (f *fields) fail(name, msg string) {
	f.problems = append(f.problems, "[body."+name+"] "+msg)
}

// str returns a string member. A missing required member or one of
// another type is recorded as a problem.
func (f *fields) str(name string, required bool) (string, bool) {
	raw, ok := f.m[name]
	if !ok || (!required && string(raw) == "null") {
		if required {
			f.fail(name, "Invalid input: expected string, received undefined")
		}
		return "", false
	}
	var s string
	if jsonKind(raw) != "string" || json.Unmarshal(raw, &s) != nil {
		f.fail(name, "Invalid input: expected string, received "+jsonKind(raw))
		return "", false
	}
	return s, true
}

// boolean returns an optional boolean member, def when absent.
func (f *fields) boolean(name string, def bool) bool {
	raw, ok := f.m[name]
	if !ok || string(raw) == "null" {
		return def
	}
	switch string(raw) {
	case "true":
		return true
	case "false":
		return false
	}
	f.fail(name, "Invalid input: expected boolean, received "+jsonKind(raw))
	return def
}

// maxBytes records a problem when s is longer than n bytes.
func (f *fields) maxBytes(name, s string, n int) {
	if len(s) > n {
		f.fail(name, fmt.Sprintf("Too big: expected string to have <=%d characters", n))
	}
}

func (f *fields) err() *apiError {
	if len(f.problems) == 0 {
		return nil
	}
	return errBadRequest("VALIDATION_ERROR", strings.Join(f.problems, "; "))
}

// strings returns an optional array-of-strings member (nil when absent).
func (f *fields) strings(name string) []string {
	raw, ok := f.m[name]
	if !ok || string(raw) == "null" {
		return nil
	}
	var out []string
	if jsonKind(raw) != "array" || json.Unmarshal(raw, &out) != nil {
		f.fail(name, "Invalid input: expected array of strings, received "+jsonKind(raw))
		return nil
	}
	return out
}

// object decodes an optional object member into v, reporting whether it
// was there. Members of the wrong type are a problem.
func (f *fields) object(name string, v any) bool {
	raw, ok := f.m[name]
	if !ok || string(raw) == "null" {
		return false
	}
	if jsonKind(raw) != "object" || json.Unmarshal(raw, v) != nil {
		f.fail(name, "Invalid input: expected object, received "+jsonKind(raw))
		return false
	}
	return true
}
