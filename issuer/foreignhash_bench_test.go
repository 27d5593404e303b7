package issuer_test

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// BenchmarkSignInForeign: at the real scrypt cost, a sign-in's time on an
// account whose hash another system wrote, at that system's default
// cost, next to one on an account with the sidecar's own: a wrong
// password (every try until the first right one, padded up to scrypt's
// time when the format is cheaper), and the first right one (the foreign
// hash, then scrypt for the upgrade). Medians; ratios to the native
// account's wrong password. Run:
// go test -run XXX -bench SignInForeign -benchtime 1x ./issuer
func BenchmarkSignInForeign(b *testing.B) {
	e := newEnvB(b)
	cases := []struct{ name, format, madeBy string }{
		{"bcrypt-10 (PHP default)", "bcrypt", "PASSWORD_DEFAULT"},
		{"argon2id m=64MiB t=4 p=1 (PHP default)", "argon2id", "PASSWORD_ARGON2ID), its default"},
		{"scrypt-phc ln=16 r=8 (passlib default)", "scrypt-phc", "its default cost"},
		{"django-pbkdf2-sha256 260,000 (Django 3.2 default)", "django-pbkdf2-sha256", "its default iterations"},
		{"passlib-pbkdf2-sha256 29,000 (passlib default)", "passlib-pbkdf2-sha256", "its default rounds"},
		{"aspnet-identity-v3 SHA512 100,000 (.NET 7+ default)", "aspnet-identity-v3", ".NET 7+"},
		{"phpass 2^12", "phpass", "ident P"},
		{"md5 (weak)", "md5", "PHP"},
	}
	const tries = 15
	wrong := func(email string) time.Duration {
		var ds []time.Duration
		for range tries {
			start := time.Now()
			if r := e.signIn(email, "wrong-password-123"); r.status != 401 {
				b.Fatalf("%s: got %d %s", email, r.status, r.body)
			}
			ds = append(ds, time.Since(start))
		}
		return median(ds)
	}
	for b.Loop() {
		e.signUp("native@example.com", pw)
		base := wrong("native@example.com")
		b.ReportMetric(float64(base.Microseconds())/1000, "ms-native-wrong")
		for i, c := range cases {
			password, stored := benchVector(b, c.format, c.madeBy)
			var first []time.Duration
			for j := range 5 {
				email := fmt.Sprintf("f%d-%d@example.com", i, j)
				e.withForeignHash(email, stored)
				start := time.Now()
				if r := e.signIn(email, password); r.status != 200 {
					b.Fatalf("%s: got %d %s", c.name, r.status, r.body)
				}
				first = append(first, time.Since(start))
			}
			// Wrong passwords on an account still holding the foreign hash.
			e.withForeignHash(fmt.Sprintf("f%d-w@example.com", i), stored)
			w := wrong(fmt.Sprintf("f%d-w@example.com", i))
			b.Logf("%-52s wrong %6.1f ms (%.2fx)  first right %6.1f ms (%.2fx)", c.name,
				float64(w.Microseconds())/1000, float64(w)/float64(base),
				float64(median(first).Microseconds())/1000, float64(median(first))/float64(base))
		}
	}
}

// benchVector is the first committed vector of format made by a library
// whose made_by contains madeBy.
func benchVector(b *testing.B, format, madeBy string) (password, stored string) {
	vs := committedVectors(b, format)
	for i := len(vs) - 1; i >= 0; i-- { // the last: the dearest of a library's
		if v := vs[i]; strings.Contains(v.MadeBy, madeBy) && v.Password != "" {
			return v.Password, v.Hash
		}
	}
	b.Fatalf("no %s vector made by %q", format, madeBy)
	return "", ""
}
