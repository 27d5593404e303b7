package config

import (
	"testing"

	"gopkg.in/yaml.v3"
)

// decodeScalar decodes text into v and reports whether it did; when
// wantErr is set, it wants the decoding to fail with exactly that one
// *yaml.TypeError instead (a bad value is reported with its line and the
// decoder goes on).
func decodeScalar(t *testing.T, text string, v any, wantErr string) bool {
	t.Helper()
	err := yaml.Unmarshal([]byte(text), v)
	if wantErr != "" {
		te, ok := err.(*yaml.TypeError)
		if !ok || len(te.Errors) != 1 || te.Errors[0] != wantErr {
			t.Errorf("got %#v, want a *yaml.TypeError with %q", err, wantErr)
		}
		return false
	}
	if err != nil {
		t.Fatalf("got error %v, want none", err)
	}
	return true
}

// TestByteRateYAML: what the YAML form reads, and the line-numbered
// refusals of what it does not; each value read writes back the same.
func TestByteRateYAML(t *testing.T) {
	const form = `want N/s with a unit of B, KiB or MiB (e.g. 1KiB/s), or off`
	tests := []struct {
		yaml    string
		want    ByteRate
		back    string // String; "" when wantErr
		wantErr string
	}{
		{yaml: "r: 1KiB/s", want: 1024, back: "1KiB/s"},
		{yaml: "r: 512B/s", want: 512, back: "512B/s"},
		{yaml: "r: 1536B/s", want: 1536, back: "1536B/s"},
		{yaml: "r: 2048B/s", want: 2048, back: "2KiB/s"},
		{yaml: "r: 3MiB/s", want: 3 << 20, back: "3MiB/s"},
		{yaml: "r: off", want: 0, back: "off"},
		{yaml: "r: 0", want: 0, back: "off"},
		{yaml: "r: 0KiB/s", wantErr: `line 1: invalid byte rate "0KiB/s": N must be positive; write off for no rate`},
		{yaml: "r: 1KB/s", wantErr: `line 1: invalid byte rate "1KB/s": ` + form},
		{yaml: "r: 1kib/s", wantErr: `line 1: invalid byte rate "1kib/s": ` + form},
		{yaml: "r: 1024", wantErr: `line 1: invalid byte rate "1024": ` + form},
		{yaml: "r: 1KiB/m", wantErr: `line 1: invalid byte rate "1KiB/m": ` + form},
		{yaml: "r: 1.5KiB/s", wantErr: `line 1: invalid byte rate "1.5KiB/s": ` + form},
		{yaml: "r: -1KiB/s", wantErr: `line 1: invalid byte rate "-1KiB/s": ` + form},
		{yaml: "r: 1 KiB/s", wantErr: `line 1: invalid byte rate "1 KiB/s": ` + form},
		{yaml: "r: 2000000MiB/s", wantErr: `line 1: invalid byte rate "2000000MiB/s": at most 1048576MiB/s`},
		{yaml: "r: [1KiB/s]", wantErr: `line 1: want a byte rate like 1KiB/s, or off, got a list`},
	}
	for _, tt := range tests {
		t.Run(tt.yaml, func(t *testing.T) {
			var v struct{ R ByteRate }
			if !decodeScalar(t, tt.yaml, &v, tt.wantErr) {
				return
			}
			if v.R != tt.want || v.R.String() != tt.back {
				t.Errorf("got %d (%s), want %d (%s)", v.R, v.R, tt.want, tt.back)
			}
		})
	}
}

// TestPercentYAML: "N%" and nothing else; the range is Validate's.
func TestPercentYAML(t *testing.T) {
	tests := []struct {
		yaml    string
		want    Percent
		wantErr string
	}{
		{yaml: "p: 25%", want: 25},
		{yaml: "p: 100%", want: 100},
		{yaml: "p: 0%", want: 0},
		{yaml: "p: 25", wantErr: `line 1: want a percentage like 25%, got 25`},
		{yaml: "p: 0.25", wantErr: `line 1: want a percentage like 25%, got 0.25`},
		{yaml: "p: 25 %", wantErr: `line 1: want a percentage like 25%, got "25 %"`},
		{yaml: "p: 12.5%", wantErr: `line 1: want a percentage like 25%, got "12.5%"`},
		{yaml: "p: 1000%", wantErr: `line 1: want a percentage like 25%, got "1000%"`},
		{yaml: "p: [25%]", wantErr: `line 1: want a percentage like 25%, got a list`},
	}
	for _, tt := range tests {
		t.Run(tt.yaml, func(t *testing.T) {
			var v struct{ P Percent }
			if !decodeScalar(t, tt.yaml, &v, tt.wantErr) {
				return
			}
			if v.P != tt.want || v.P.String() != tt.yaml[3:] {
				t.Errorf("got %d (%s), want %d (%s)", v.P, v.P, tt.want, tt.yaml[3:])
			}
		})
	}
}
