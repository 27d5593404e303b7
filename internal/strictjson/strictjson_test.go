package strictjson

import "testing"

func TestCheckDuplicates(t *testing.T) {
	tests := []struct {
		in string
		ok bool
	}{
		{`{"a":1,"b":2}`, true},
		{`{"a":{"b":1},"c":[{"b":2},{"b":3}]}`, true},
		{`[1,2]`, true},
		{`"x"`, true},
		{`{"a":1,"a":2}`, false},
		{`{"x":{"a":1,"a":2}}`, false},
		{`{"x":[{"a":1,"a":2}]}`, false},
		{`{"a":1} {}`, false},
		{`{"a":`, false},
		{``, false},
		{`{"\u0061":1,"a":2}`, false},
	}
	for _, tt := range tests {
		if err := CheckDuplicates([]byte(tt.in)); (err == nil) != tt.ok {
			t.Errorf("CheckDuplicates(%s): got %v, want ok=%v", tt.in, err, tt.ok)
		}
	}
}
