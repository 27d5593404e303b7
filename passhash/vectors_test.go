package passhash_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/authsidecar/authsidecar/passhash"
)

// vector is one password and the hash a real library made of it
// (testdata/gen/gen.sh wrote them; made_by names the library).
type vector struct {
	Password string `json:"password"`
	Hash     string `json:"hash"`
	MadeBy   string `json:"made_by"`
}

// loadVectors reads testdata/<format>.json for every format.
func loadVectors(t testing.TB) map[passhash.Format][]vector {
	t.Helper()
	all := map[passhash.Format][]vector{}
	files, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		var f struct {
			Format  passhash.Format `json:"format"`
			Vectors []vector        `json:"vectors"`
		}
		if err := json.Unmarshal(b, &f); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		all[f.Format] = append(all[f.Format], f.Vectors...)
	}
	return all
}

var allowWeak = passhash.Options{AllowWeak: true}

// TestVectors: every format verifies the passwords its own libraries
// hashed, and refuses others.
func TestVectors(t *testing.T) {
	all := loadVectors(t)
	for _, f := range passhash.Formats() {
		if len(all[f]) == 0 {
			t.Errorf("format %s: no test vectors in testdata", f)
		}
	}
	for f, vs := range all {
		for i, v := range vs {
			t.Run(string(f)+"/"+v.MadeBy, func(t *testing.T) {
				h, err := passhash.Parse(v.Hash, allowWeak)
				if err != nil {
					t.Fatalf("vector %d: Parse: %v", i, err)
				}
				if h.Format() != f {
					t.Fatalf("vector %d: got format %s, want %s", i, h.Format(), f)
				}
				if !h.Verify(v.Password) {
					t.Errorf("vector %d: the right password %q does not verify", i, v.Password)
				}
				for _, wrong := range wrongPasswords(v.Password) {
					if h.Verify(wrong) {
						t.Errorf("vector %d: the wrong password %q verifies (right: %q)", i, wrong, v.Password)
					}
				}
			})
		}
	}
}

// wrongPasswords are near misses of p: another first character, a
// character more in front, the empty one.
func wrongPasswords(p string) []string {
	wrong := []string{"x" + p, strings.ToUpper(p[:min(1, len(p))]) + "!" + p[min(1, len(p)):]}
	if p != "" {
		wrong = append(wrong, "")
		_, n := utf8.DecodeRuneInString(p)
		wrong = append(wrong, "Z"+p[n:])
	}
	return wrong
}

// TestVectorsPasswordBytes: how each format reads the password. Only the
// sidecar's own (Better Auth's) takes its NFKC form: "\ufb01ne print"
// hashed there verifies as "fine print", and nowhere else. bcrypt reads
// 72 bytes, as PHP, passlib and bcryptjs did when they hashed.
func TestVectorsPasswordBytes(t *testing.T) {
	for f, vs := range loadVectors(t) {
		for _, v := range vs {
			h, err := passhash.Parse(v.Hash, allowWeak)
			if err != nil {
				t.Fatal(err)
			}
			if strings.HasPrefix(v.Password, "\ufb01") {
				if got, want := h.Verify("fi"+v.Password[len("\ufb01"):]), f == passhash.Scrypt; got != want {
					t.Errorf("%s (%s): the NFKC form verifies: got %t, want %t", f, v.MadeBy, got, want)
				}
			}
			if len(v.Password) > 72 {
				if got, want := h.Verify(v.Password[:72]), f == passhash.Bcrypt; got != want {
					t.Errorf("%s (%s): the first 72 bytes verify: got %t, want %t", f, v.MadeBy, got, want)
				}
			}
		}
	}
}

// TestVectorsTampered: a hash with one character of its last part
// changed never verifies the password (Parse may refuse it outright).
func TestVectorsTampered(t *testing.T) {
	for f, vs := range loadVectors(t) {
		for _, v := range vs {
			for back := 2; back <= 6; back += 2 {
				i := len(v.Hash) - back
				c := v.Hash[i]
				if c == '=' {
					continue
				}
				// '0' and '1' are in every alphabet the formats use, and
				// no two spellings of one value (as 'a' and 'A' in hex).
				swap := byte('0')
				if c == '0' {
					swap = '1'
				}
				tampered := v.Hash[:i] + string(swap) + v.Hash[i+1:]
				h, err := passhash.Parse(tampered, allowWeak)
				if err == nil && h.Verify(v.Password) {
					t.Errorf("%s (%s): changed at %d from the end, still verifies", f, v.MadeBy, back)
				}
			}
		}
	}
}

// TestWeakRefused: the weak formats parse only when allowed.
func TestWeakRefused(t *testing.T) {
	for f, vs := range loadVectors(t) {
		_, err := passhash.Parse(vs[0].Hash, passhash.Options{})
		if got, want := errors.Is(err, passhash.ErrWeak), f.Weak(); got != want {
			t.Errorf("%s without AllowWeak: got ErrWeak %t (%v), want %t", f, got, err, want)
		}
	}
}
