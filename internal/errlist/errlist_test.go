package errlist

import (
	"errors"
	"testing"
)

func TestPrefix(t *testing.T) {
	a, b := errors.New("a"), errors.New("b")
	tests := []struct {
		err  error
		want string
	}{
		{nil, ""},
		{a, "db: a"},
		{errors.Join(a, b), "db: a\ndb: b"},
		{errors.Join(a, errors.Join(b)), "db: a\ndb: b"},
	}
	for _, tt := range tests {
		got := Prefix("db", tt.err)
		if s := errString(got); s != tt.want {
			t.Errorf("Prefix(%v) = %q, want %q", tt.err, s, tt.want)
		}
		if tt.err != nil && !errors.Is(got, a) {
			t.Errorf("Prefix(%v) lost the wrapped error", tt.err)
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
