package config

import (
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

func TestDurationYAML(t *testing.T) {
	tests := []struct {
		yaml    string
		want    time.Duration
		wantErr string
	}{
		{yaml: "d: 720h", want: 720 * time.Hour},
		{yaml: "d: 30s", want: 30 * time.Second},
		{yaml: "d: 1h30m", want: 90 * time.Minute},
		{yaml: "d: 1.5s", want: 1500 * time.Millisecond},
		{yaml: "d: 250ms", want: 250 * time.Millisecond},
		{yaml: `d: "10m"`, want: 10 * time.Minute},
		{yaml: "d: 0", want: 0},
		{yaml: "d: 0s", want: 0},
		{yaml: "d: -5s", want: -5 * time.Second}, // decodes; Validate decides
		{yaml: "d: 30", wantErr: `line 1: invalid duration "30": a bare number has no unit; write it with one, like 30s, 30m or 30h`},
		{yaml: `d: "30"`, wantErr: `line 1: invalid duration "30": a bare number has no unit; write it with one, like 30s, 30m or 30h`},
		{yaml: "d: 1.5", wantErr: `line 1: invalid duration "1.5": a bare number has no unit; write it with one, like 1.5s, 1.5m or 1.5h`},
		{yaml: "d: 7d", wantErr: `line 1: invalid duration "7d": there is no day unit; write 168h for 7 days`},
		{yaml: "d: 1.5d", wantErr: `line 1: invalid duration "1.5d": want a number with a unit, like 30s, 10m or 720h`},
		{yaml: `d: ""`, wantErr: `line 1: invalid duration "": want a number with a unit, like 30s, 10m or 720h`},
		{yaml: "d: inf", wantErr: `line 1: invalid duration "inf": want a number with a unit, like 30s, 10m or 720h`},
		{yaml: "d: [30s]", wantErr: `line 1: want a duration like 30s, 10m or 720h, got a list`},
		{yaml: "d: {s: 30}", wantErr: `line 1: want a duration like 30s, 10m or 720h, got a mapping`},
	}
	for _, tt := range tests {
		t.Run(tt.yaml, func(t *testing.T) {
			var v struct{ D Duration }
			if !decodeScalar(t, tt.yaml, &v, tt.wantErr) {
				return
			}
			if got := v.D.D(); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestDurationString(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want string
	}{
		{720 * time.Hour, "720h"},
		{10 * time.Minute, "10m"},
		{30 * time.Second, "30s"},
		{90 * time.Minute, "1h30m"},
		{time.Hour + time.Second, "1h0m1s"},
		{1500 * time.Millisecond, "1.5s"},
		{0, "0s"},
		{-time.Hour, "-1h"},
		{10*time.Minute + 500*time.Millisecond, "10m0.5s"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := Duration(tt.d).String(); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
			// What String writes must read back as the same duration.
			back, err := parseDuration(Duration(tt.d).String())
			if err != nil || back != tt.d {
				t.Errorf("got %v, %v reading %q back, want %v", back, err, tt.want, tt.d)
			}
		})
	}
}

func TestDurationMarshalYAML(t *testing.T) {
	out, err := yaml.Marshal(struct{ D Duration }{Duration(720 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(out), "d: 720h\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestRateYAML(t *testing.T) {
	tests := []struct {
		yaml    string
		want    Rate
		wantErr string
	}{
		{yaml: "r: 5/m", want: Rate{N: 5, Per: time.Minute}},
		{yaml: "r: 20/s", want: Rate{N: 20, Per: time.Second}},
		{yaml: "r: 100/h", want: Rate{N: 100, Per: time.Hour}},
		{yaml: `r: "05/m"`, want: Rate{N: 5, Per: time.Minute}},
		{yaml: "r: off", want: Rate{}},
		{yaml: "r: 0", want: Rate{}},
		{yaml: `r: "0"`, want: Rate{}},
		{yaml: "r: 0/m", wantErr: `line 1: invalid rate "0/m": N must be positive; write off to disable the limit`},
		{yaml: "r: 5", wantErr: `line 1: invalid rate "5": want N/s, N/m or N/h (e.g. 5/m), or off`},
		{yaml: "r: 5/min", wantErr: `line 1: invalid rate "5/min": want N/s, N/m or N/h (e.g. 5/m), or off`},
		{yaml: "r: 5/M", wantErr: `line 1: invalid rate "5/M": want N/s, N/m or N/h (e.g. 5/m), or off`},
		{yaml: "r: -5/m", wantErr: `line 1: invalid rate "-5/m": want N/s, N/m or N/h (e.g. 5/m), or off`},
		{yaml: "r: +5/m", wantErr: `line 1: invalid rate "+5/m": want N/s, N/m or N/h (e.g. 5/m), or off`},
		{yaml: "r: /m", wantErr: `line 1: invalid rate "/m": want N/s, N/m or N/h (e.g. 5/m), or off`},
		{yaml: "r: 5 / m", wantErr: `line 1: invalid rate "5 / m": want N/s, N/m or N/h (e.g. 5/m), or off`},
		{yaml: "r: 5/m/s", wantErr: `line 1: invalid rate "5/m/s": want N/s, N/m or N/h (e.g. 5/m), or off`},
		{yaml: "r: false", wantErr: `line 1: invalid rate "false": want N/s, N/m or N/h (e.g. 5/m), or off`},
		{yaml: "r: 99999999999999999999/s", wantErr: `line 1: invalid rate "99999999999999999999/s": 99999999999999999999 is too large`},
		{yaml: "r: [5/m]", wantErr: `line 1: want a rate like 5/m, or off, got a list`},
	}
	for _, tt := range tests {
		t.Run(tt.yaml, func(t *testing.T) {
			var v struct{ R Rate }
			if !decodeScalar(t, tt.yaml, &v, tt.wantErr) {
				return
			}
			if v.R != tt.want {
				t.Errorf("got %+v, want %+v", v.R, tt.want)
			}
		})
	}
}

func TestRateString(t *testing.T) {
	tests := []struct {
		r            Rate
		want         string
		wantDisabled bool
	}{
		{Rate{N: 5, Per: time.Minute}, "5/m", false},
		{Rate{N: 20, Per: time.Second}, "20/s", false},
		{Rate{N: 1, Per: time.Hour}, "1/h", false},
		{Rate{}, "off", true},
		{Rate{N: 0, Per: time.Minute}, "off", true},
		{Rate{N: 3, Per: 90 * time.Second}, "3/1m30s", false},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := tt.r.String(); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
			if got := tt.r.Disabled(); got != tt.wantDisabled {
				t.Errorf("got Disabled %v, want %v", got, tt.wantDisabled)
			}
			out, err := yaml.Marshal(tt.r)
			if err != nil {
				t.Fatal(err)
			}
			want := tt.want + "\n"
			if tt.wantDisabled {
				want = "\"off\"\n" // quoted: YAML 1.1 read a bare off as false
			}
			if got := string(out); got != want {
				t.Errorf("got YAML %q, want %q", got, want)
			}
		})
	}
}
