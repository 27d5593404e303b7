package issuer

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestReadFields(t *testing.T) {
	tests := []struct {
		name      string
		ct        string
		body      string
		allowForm bool
		limit     int64
		wantCode  string // "" means success
		wantEmail string
	}{
		{"json", "application/json", `{"email":"a@b.co"}`, false, 1024, "", "a@b.co"},
		{"json charset", "application/json; charset=utf-8", `{"email":"a@b.co"}`, false, 1024, "", "a@b.co"},
		{"form", "application/x-www-form-urlencoded", `email=a%40b.co`, true, 1024, "", "a@b.co"},
		{"form not allowed", "application/x-www-form-urlencoded", `email=a%40b.co`, false, 1024, "UNSUPPORTED_MEDIA_TYPE", ""},
		{"text plain", "text/plain", `{"email":"a@b.co"}`, true, 1024, "UNSUPPORTED_MEDIA_TYPE", ""},
		{"no type with body", "", `{"email":"a@b.co"}`, true, 1024, "UNSUPPORTED_MEDIA_TYPE", ""},
		{"empty", "", ``, true, 1024, "", ""},
		{"malformed", "application/json", `{"email":`, false, 1024, "BAD_REQUEST", ""},
		{"trailing data", "application/json", `{"email":"a@b.co"} {}`, false, 1024, "BAD_REQUEST", ""},
		{"trailing garbage", "application/json", `{"email":"a@b.co"}x`, false, 1024, "BAD_REQUEST", ""},
		{"duplicate member", "application/json", `{"email":"a@b.co","email":"c@d.co"}`, false, 1024, "BAD_REQUEST", ""},
		{"nested duplicate", "application/json", `{"x":{"a":1,"a":2}}`, false, 1024, "BAD_REQUEST", ""},
		{"duplicate in array", "application/json", `{"x":[{"a":1,"a":2}]}`, false, 1024, "BAD_REQUEST", ""},
		{"invalid utf8", "application/json", "{\"email\":\"\xff\"}", false, 1024, "BAD_REQUEST", ""},
		{"array", "application/json", `[1,2]`, false, 1024, "VALIDATION_ERROR", ""},
		{"null", "application/json", `null`, false, 1024, "VALIDATION_ERROR", ""},
		{"too large", "application/json", `{"email":"` + strings.Repeat("a", 2000) + `"}`, false, 1024, "PAYLOAD_TOO_LARGE", ""},
		{"form duplicate", "application/x-www-form-urlencoded", `email=a&email=b`, true, 1024, "BAD_REQUEST", ""},
		{"form bad escape", "application/x-www-form-urlencoded", `email=%zz`, true, 1024, "BAD_REQUEST", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(tt.body))
			if tt.ct != "" {
				r.Header.Set("Content-Type", tt.ct)
			}
			f, apiErr := readFields(httptest.NewRecorder(), r, tt.limit, tt.allowForm)
			if tt.wantCode != "" {
				if apiErr == nil {
					t.Fatalf("got success, want %s", tt.wantCode)
				}
				if apiErr.code != tt.wantCode {
					t.Fatalf("got %s (%s), want %s", apiErr.code, apiErr.message, tt.wantCode)
				}
				return
			}
			if apiErr != nil {
				t.Fatalf("got %v, want success", apiErr)
			}
			email, _ := f.str("email", false)
			if email != tt.wantEmail {
				t.Fatalf("got email %q, want %q", email, tt.wantEmail)
			}
		})
	}
}

func TestFieldsTypeErrors(t *testing.T) {
	f, apiErr := decodeJSONFields([]byte(`{"name":"Bob","email":42,"flag":"yes"}`))
	if apiErr != nil {
		t.Fatal(apiErr)
	}
	f.str("name", true)
	f.str("email", true)
	f.str("password", true)
	f.boolean("flag", false)
	got := f.err()
	want := "[body.email] Invalid input: expected string, received number; [body.password] Invalid input: expected string, received undefined; [body.flag] Invalid input: expected boolean, received string"
	if got == nil || got.message != want || got.code != "VALIDATION_ERROR" {
		t.Fatalf("got %v, want VALIDATION_ERROR %q", got, want)
	}
}
