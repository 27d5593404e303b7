package config

import "testing"

// TestFlowStyleErrorsNameTheirKey: several keys share a line in flow style
// ({a: 1, b: 2}), and yaml.v3 reports a bad value by its line only; the
// problem must still name the key whose value is bad, not the first key
// on the line, and each bad value once.
func TestFlowStyleErrorsNameTheirKey(t *testing.T) {
	tests := []struct{ file, want string }{
		{"auth: {secret_env: X, jwt_ttl: forever}\n",
			`f.yaml:1: auth.jwt_ttl: invalid duration "forever": want a number with a unit, like 30s, 10m or 720h`},
		{"keys: {max_age: 10m, cooldown: nope}\n",
			`f.yaml:1: keys.cooldown: invalid duration "nope": want a number with a unit, like 30s, 10m or 720h`},
		{"auth: {secret_env: X, jwt_ttl: 1h, session_ttl: []}\n",
			`f.yaml:1: auth.session_ttl: want a duration like 30s, 10m or 720h, got a list`},
		{"auth: {secret_env: X, trusted_origins: [\"https://a.example\", {b: c}]}\n",
			`f.yaml:1: auth.trusted_origins[1]: want a string, got a mapping`},
		{"auth: {jwt_ttl: forever, session_ttl: forever}\n",
			"f.yaml:1: auth.jwt_ttl: invalid duration \"forever\": want a number with a unit, like 30s, 10m or 720h\n" +
				`f.yaml:1: auth.session_ttl: invalid duration "forever": want a number with a unit, like 30s, 10m or 720h`},
		{"limits: {signin_per_ip: 5/m, signup_per_ip: lots}\n",
			`f.yaml:1: limits.signup_per_ip: invalid rate "lots": want N/s, N/m or N/h (e.g. 5/m), or off`},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			_, err := Parse("f.yaml", []byte(tt.file))
			if err == nil || err.Error() != tt.want {
				t.Errorf("got\n%v\nwant\n%s", err, tt.want)
			}
		})
	}
}
