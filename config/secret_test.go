package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

const testSecretValue = "s3cr3t-Valu3-0123456789-abcdefghijklmnop"

func TestSecretRedaction(t *testing.T) {
	s := NewSecret(testSecretValue)
	type exported struct{ Secret Secret }
	type unexported struct{ secret Secret }
	jsonOf := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	yamlOf := func(v any) string {
		b, err := yaml.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	slogJSON := func(v any) string {
		var buf bytes.Buffer
		slog.New(slog.NewJSONHandler(&buf, nil)).Info("loaded", "secret", v)
		return buf.String()
	}
	text, _ := s.MarshalText()
	tests := []struct{ name, got, want string }{
		{"%v", fmt.Sprintf("%v", s), "[redacted]"},
		{"%s", fmt.Sprintf("%s", s), "[redacted]"},
		{"%#v", fmt.Sprintf("%#v", s), "[redacted]"},
		{"%+v", fmt.Sprintf("%+v", s), "[redacted]"},
		{"%q", fmt.Sprintf("%q", s), "[redacted]"},
		{"%x", fmt.Sprintf("%x", s), "[redacted]"},
		{"%d", fmt.Sprintf("%d", s), "[redacted]"},
		{"pointer %v", fmt.Sprintf("%v", &s), "[redacted]"},
		{"Sprint", fmt.Sprint(s), "[redacted]"},
		{"String", s.String(), "[redacted]"},
		{"GoString", s.GoString(), "[redacted]"},
		{"in exported field %+v", fmt.Sprintf("%+v", exported{s}), "{Secret:[redacted]}"},
		{"in exported field %#v", fmt.Sprintf("%#v", exported{s}), "config.exported{Secret:[redacted]}"},
		{"json", jsonOf(s), `"[redacted]"`},
		{"json field", jsonOf(exported{s}), `{"Secret":"[redacted]"}`},
		{"yaml", yamlOf(s), "'[redacted]'\n"},
		{"yaml field", yamlOf(exported{s}), "secret: '[redacted]'\n"},
		{"text", string(text), "[redacted]"},
		{"slog JSON", slogJSON(s), `"secret":"[redacted]"`},
		{"slog JSON pointer", slogJSON(&s), `"secret":"[redacted]"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if strings.Contains(tt.got, testSecretValue) {
				t.Fatalf("got %q, which leaks the secret", tt.got)
			}
			if !strings.Contains(tt.got, tt.want) {
				t.Errorf("got %q, want it to contain %q", tt.got, tt.want)
			}
		})
	}
	// fmt cannot call methods on an unexported field; the value must still
	// not show (it prints a pointer).
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%x", "%d"} {
		if got := fmt.Sprintf(verb, unexported{s}); strings.Contains(got, testSecretValue) ||
			strings.Contains(got, fmt.Sprintf("%x", testSecretValue)) {
			t.Errorf("%s of an unexported field: got %q, which leaks the secret", verb, got)
		}
	}
}

func TestSecretBytes(t *testing.T) {
	s := NewSecret(testSecretValue)
	b := s.Bytes()
	if got := string(b); got != testSecretValue {
		t.Fatalf("got %q, want %q", got, testSecretValue)
	}
	b[0] = 'X'
	if got := string(s.Bytes()); got != testSecretValue {
		t.Errorf("got %q after modifying a returned slice, want %q", got, testSecretValue)
	}
	if got := (Secret{}).Bytes(); len(got) != 0 {
		t.Errorf("got %q from the zero Secret, want empty", got)
	}
}

func TestLoadSecret(t *testing.T) {
	tests := []struct {
		name      string
		secretEnv string // "" means the default AUTH_SECRET
		env       map[string]string
		want      string // the error; "" means success
	}{
		{"ok", "", map[string]string{"AUTH_SECRET": testSecretValue}, ""},
		{"ok, base64 of 32 random bytes", "", map[string]string{"AUTH_SECRET": "q8Jz0m3b7yVnC1xL9wR4tE6uH2aS5dF0gK8pO1iU7vM="}, ""},
		{"ok, exactly 32 bytes", "", map[string]string{"AUTH_SECRET": "0123456789abcdefghijklmnopqrstuv"}, ""},
		{"other variable", "SIDECAR_KEY", map[string]string{"SIDECAR_KEY": testSecretValue, "AUTH_SECRET": "x"}, ""},
		{"missing", "", map[string]string{},
			"AUTH_SECRET is not set: export a random secret of at least 32 bytes (e.g. openssl rand -base64 32)"},
		{"missing, other variable", "SIDECAR_KEY", map[string]string{"AUTH_SECRET": testSecretValue},
			"SIDECAR_KEY is not set: export a random secret of at least 32 bytes (e.g. openssl rand -base64 32)"},
		{"short", "", map[string]string{"AUTH_SECRET": "Xk9#mQ2$vL7p"},
			"AUTH_SECRET is too short: 12 bytes, want at least 32 (e.g. openssl rand -base64 32)"},
		{"31 bytes", "", map[string]string{"AUTH_SECRET": "0123456789abcdefghijklmnopqrstu"},
			"AUTH_SECRET is too short: 31 bytes, want at least 32 (e.g. openssl rand -base64 32)"},
		{"changeme", "", map[string]string{"AUTH_SECRET": "changeme"}, placeholderMessage},
		{"CHANGE-ME padded", "", map[string]string{"AUTH_SECRET": "CHANGE-ME-before-going-to-production-please"}, placeholderMessage},
		{"secret", "", map[string]string{"AUTH_SECRET": "Secret"}, placeholderMessage},
		{"better-auth example", "", map[string]string{"AUTH_SECRET": "better-auth-secret-12345678901234567890"}, placeholderMessage},
		{"one character repeated", "", map[string]string{"AUTH_SECRET": strings.Repeat("a", 48)}, placeholderMessage},
		{"short pattern repeated", "", map[string]string{"AUTH_SECRET": strings.Repeat("abc1", 10)}, placeholderMessage},
		{"word repeated", "", map[string]string{"AUTH_SECRET": strings.Repeat("secret", 6)}, placeholderMessage},
		{"spaces", "", map[string]string{"AUTH_SECRET": strings.Repeat(" ", 40)}, placeholderMessage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			if tt.secretEnv != "" {
				c.Auth.SecretEnv = tt.secretEnv
			}
			s, err := c.LoadSecret(func(k string) string { return tt.env[k] })
			if tt.want == "" {
				if err != nil {
					t.Fatalf("got error %v, want none", err)
				}
				if got, want := string(s.Bytes()), tt.env[c.Auth.SecretEnv]; got != want {
					t.Errorf("got secret %q, want %q", got, want)
				}
				return
			}
			if err == nil {
				t.Fatalf("got no error, want %q", tt.want)
			}
			want := strings.ReplaceAll(tt.want, "AUTH_SECRET", c.Auth.SecretEnv)
			if got := err.Error(); got != want {
				t.Errorf("got %q, want %q", got, want)
			}
			if v := tt.env[c.Auth.SecretEnv]; strings.TrimSpace(v) != "" && strings.Contains(err.Error(), v) {
				t.Errorf("got %q, which contains the secret", err)
			}
			if len(s.Bytes()) != 0 {
				t.Errorf("got a secret along with the error, want the zero Secret")
			}
		})
	}
}

const placeholderMessage = "AUTH_SECRET is a well-known placeholder or a repeated pattern: export a random secret of at least 32 bytes instead (e.g. openssl rand -base64 32)"

func TestLoadSecretWithoutSecretEnv(t *testing.T) {
	c := Default()
	c.Auth.SecretEnv = ""
	_, err := c.LoadSecret(func(string) string { return testSecretValue })
	want := "auth.secret_env is empty: name the environment variable that holds the secret"
	if err == nil || err.Error() != want {
		t.Errorf("got %v, want %s", err, want)
	}
}

func TestSecretHint(t *testing.T) {
	tests := []struct {
		name, yaml string
		wantEnv    string
		wantNeeded bool
	}{
		{"empty file", "", "AUTH_SECRET", true},
		{"not YAML", "auth: [\n", "AUTH_SECRET", true},
		{"named despite other errors", "auth:\n  secret_env: MY_SECRET\n  jwt_tll: 1h\n  jwt_ttl: forever\n", "MY_SECRET", true},
		{"invalid name", "auth: { secret_env: \"no such\" }\n", "", true},
		{"verifier", "mode: verifier\nlisten: 12\n", "AUTH_SECRET", false},
		{"verifier with cookie routes", "mode: verifier\nroutes: { cookie_only: [/x] }\n", "AUTH_SECRET", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env, needed := SecretHint([]byte(tt.yaml))
			if env != tt.wantEnv || needed != tt.wantNeeded {
				t.Errorf("got %q, %v; want %q, %v", env, needed, tt.wantEnv, tt.wantNeeded)
			}
		})
	}
}

func TestLoadReloadToken(t *testing.T) {
	tests := []struct {
		name, env, value string
		want             string // the token, or the error
	}{
		{"no name: no token", "", "", ""},
		{"set", "RELOAD_TOKEN", "0123456789abcdef-token", "0123456789abcdef-token"},
		{"unset", "RELOAD_TOKEN", "", "metrics.reload_token_env: $RELOAD_TOKEN is not set: export a random token (e.g. openssl rand -base64 32), or remove the key to require none"},
		{"short", "RELOAD_TOKEN", "xyzzy", "metrics.reload_token_env: $RELOAD_TOKEN is too short: 5 bytes, want at least 16 (e.g. openssl rand -base64 32)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			c.Metrics.ReloadTokenEnv = tt.env
			tok, err := c.LoadReloadToken(func(k string) string {
				if k == tt.env {
					return tt.value
				}
				return ""
			})
			got := string(tok.Bytes())
			if err != nil {
				got = err.Error()
				if strings.Contains(got, tt.value) && tt.value != "" {
					t.Errorf("the error shows the value: %s", got)
				}
			}
			if got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}
