package passhash

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParse: Parse never panics; it either refuses with one of its
// errors, without quoting the value, or returns a hash within the cost
// bounds whose verification gives the same answer twice.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.json"))
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		var v struct {
			Vectors []struct{ Password, Hash string }
		}
		if err := json.Unmarshal(b, &v); err != nil {
			f.Fatal(err)
		}
		for _, x := range v.Vectors {
			f.Add(x.Hash, x.Password)
		}
	}
	f.Fuzz(func(t *testing.T, stored, password string) {
		h, err := Parse(stored, Options{AllowWeak: true})
		if err != nil {
			if !errors.Is(err, ErrUnknownFormat) && !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrTooCostly) {
				t.Fatalf("Parse: an error of no kind: %v", err)
			}
			if len(stored) >= 24 && strings.Contains(err.Error(), stored) {
				t.Fatalf("the refusal %q quotes the stored value", err)
			}
			return
		}
		c := h.Cost()
		if c.Memory < 0 || c.Memory > max(MaxArgon2Memory, MaxScryptMemory) || c.Threads < 1 || c.Threads > MaxArgon2Threads {
			t.Fatalf("%s: cost %+v beyond the bounds", h.Format(), c)
		}
		if h.Format().Weak() {
			if _, err := Parse(stored, Options{}); !errors.Is(err, ErrWeak) {
				t.Fatalf("%s without AllowWeak: got %v, want ErrWeak", h.Format(), err)
			}
		}
		if !cheap(h) {
			return // a valid hash of a real cost: seconds of fuzzing for one input
		}
		if a, b := h.Verify(password), h.Verify(password); a != b {
			t.Fatalf("%s: Verify gave %t, then %t", h.Format(), a, b)
		}
	})
}

// cheap reports whether verifying h takes at most a few milliseconds.
func cheap(h Hash) bool {
	switch h := h.(type) {
	case bcryptHash:
		return string(h.stored[4:6]) <= "06"
	case argon2Hash:
		return h.memory*h.time <= 4096
	case scryptHash:
		return h.format == ScryptPHC && h.n*h.r*h.p <= 1<<14
	case pbkdf2Hash:
		return h.iterations <= 10000
	case phpassHash:
		return h.rounds <= 12
	}
	return true
}
