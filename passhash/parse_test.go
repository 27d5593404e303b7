package passhash_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/authsidecar/authsidecar/passhash"
)

// TestParseRefuses: what is not a hash of a known format, not well
// formed, or beyond the cost bounds is refused with the reason, before
// anything is hashed.
func TestParseRefuses(t *testing.T) {
	bcryptTail := "XnIFEy0XpvRAwZhqPMn87OgvGMlkXlqEHolm23XVNafI142X9m7nq" // 53 characters
	salt, key := "c2FsdHNhbHRzYWx0", "aGFzaGhhc2hoYXNoaGFzaA"             // 12 and 16 bytes
	argon := func(params string) string { return "$argon2id$v=19$" + params + "$" + salt + "$" + key }
	scrypt := func(params string) string { return "$scrypt$" + params + "$" + salt + "$" + key }
	django := "pbkdf2_sha256$%s$salt$" + "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="
	for _, c := range []struct {
		name, stored string
		want         error
	}{
		{"empty", "", passhash.ErrUnknownFormat},
		{"plain text", "hunter2 hunter2", passhash.ErrUnknownFormat},
		{"LDAP", "{SSHA}AAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", passhash.ErrUnknownFormat},
		{"unknown PHC", "$argon2d$v=19$m=65536,t=3,p=1$" + salt + "$" + key, passhash.ErrUnknownFormat},
		{"md5-crypt", "$1$saltsalt$qjXMvbEw8oaL.CzflDugX/", passhash.ErrUnknownFormat},
		{"bcrypt 2x", "$2x$10$" + bcryptTail, passhash.ErrUnknownFormat},
		{"odd hex", strings.Repeat("a", 33), passhash.ErrUnknownFormat},
		{"base64 of neither version", "AgAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", passhash.ErrUnknownFormat},

		{"bcrypt short", "$2a$10$" + bcryptTail[1:], passhash.ErrMalformed},
		{"bcrypt cost 3", "$2a$03$" + bcryptTail, passhash.ErrMalformed},
		{"bcrypt cost not digits", "$2a$1a$" + bcryptTail, passhash.ErrMalformed},
		{"bcrypt outside alphabet", "$2a$10$" + bcryptTail[:52] + "+", passhash.ErrMalformed},
		{"bcrypt cost 16", "$2b$16$" + bcryptTail, passhash.ErrTooCostly},
		{"bcrypt cost 31", "$2y$31$" + bcryptTail, passhash.ErrTooCostly},

		{"argon2 memory 512 MiB", argon("m=524288,t=1,p=1"), passhash.ErrTooCostly},
		{"argon2 time 11", argon("m=65536,t=11,p=1"), passhash.ErrTooCostly},
		{"argon2 lanes 17", argon("m=65536,t=3,p=17"), passhash.ErrTooCostly},
		{"argon2 at the bounds", argon("m=262144,t=10,p=16"), nil},
		{"argon2 version 16", strings.Replace(argon("m=65536,t=3,p=1"), "v=19", "v=16", 1), passhash.ErrMalformed},
		{"argon2 no version", "$argon2id$m=65536,t=3,p=1$" + salt + "$" + key, passhash.ErrMalformed},
		{"argon2 parameters out of order", argon("t=3,m=65536,p=1"), passhash.ErrMalformed},
		{"argon2 keyid", argon("m=65536,t=3,p=1,keyid=AAAA"), passhash.ErrMalformed},
		{"argon2 m below 8p", argon("m=15,t=3,p=2"), passhash.ErrMalformed},
		{"argon2 time 0", argon("m=65536,t=0,p=1"), passhash.ErrMalformed},
		{"argon2 leading zero", argon("m=065536,t=3,p=1"), passhash.ErrMalformed},
		{"argon2 padded salt", "$argon2id$v=19$m=65536,t=3,p=1$" + salt + "==$" + key, passhash.ErrMalformed},
		{"argon2 short salt", "$argon2id$v=19$m=65536,t=3,p=1$c2FsdA$" + key, passhash.ErrMalformed},
		{"argon2 huge count", argon("m=99999999999,t=3,p=1"), passhash.ErrMalformed},

		{"scrypt memory 4 GiB", scrypt("ln=22,r=8,p=1"), passhash.ErrTooCostly},
		{"scrypt work over 1 GiB", scrypt("ln=14,r=8,p=65"), passhash.ErrTooCostly},
		{"scrypt at the work bound", scrypt("ln=14,r=8,p=64"), nil},
		{"scrypt ln 62", scrypt("ln=62,r=1048576,p=1"), passhash.ErrTooCostly},
		{"scrypt ln 0", scrypt("ln=0,r=8,p=1"), passhash.ErrMalformed},
		{"scrypt parts missing", "$scrypt$ln=14,r=8,p=1$" + salt, passhash.ErrMalformed},

		{"django 5,000,001 iterations", strings.Replace(django, "%s", "5000001", 1), passhash.ErrTooCostly},
		{"django 5,000,000 iterations", strings.Replace(django, "%s", "5000000", 1), nil},
		{"django 0 iterations", strings.Replace(django, "%s", "0", 1), passhash.ErrMalformed},
		{"django signed iterations", strings.Replace(django, "%s", "+1000", 1), passhash.ErrMalformed},
		{"django short hash", "pbkdf2_sha256$1000$salt$47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hS", passhash.ErrMalformed},
		{"django sha1 hash of sha256 length", "pbkdf2_sha1$1000$salt$47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=", passhash.ErrMalformed},
		{"django empty salt", "pbkdf2_sha256$1000$$47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=", passhash.ErrMalformed},
		{"passlib standard base64", "$pbkdf2-sha256$1000$c2FsdA$47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU", passhash.ErrMalformed},
		{"passlib rounds over", "$pbkdf2-sha512$9999999$c2FsdA$47DEQpj8HBSa./TImW.5JCeuQeRkm5NMpJWZG3hSuFU", passhash.ErrTooCostly},

		{"phpass short", "$P$B12345678", passhash.ErrMalformed},
		{"phpass rounds 2^25", "$P$NsaltsaltAAAAAAAAAAAAAAAAAAAAAA", passhash.ErrTooCostly},
		{"phpass rounds 2^31", "$P$TsaltsaltAAAAAAAAAAAAAAAAAAAAAA", passhash.ErrMalformed},
		{"phpass rounds 2^6", "$P$4saltsaltAAAAAAAAAAAAAAAAAAAAAA", passhash.ErrMalformed},
		{"phpass outside alphabet", "$P$Bsalt+altAAAAAAAAAAAAAAAAAAAAAA", passhash.ErrMalformed},

		// Microsoft's own failure cases (PasswordHasherTest.cs).
		{"aspnet v2 too short", "AAABAgMEBQYHCAkKCwwNDg+ukCEMDf0yyQ29NYubggE=", passhash.ErrMalformed},
		{"aspnet v2 extra data", "AAABAgMEBQYHCAkKCwwNDg+ukCEMDf0yyQ29NYubggHIVY0sdEUfdyeM+E1LtH1uJgAAAAAAAAAAAAA=", passhash.ErrMalformed},
		{"aspnet v3 too short", "AQAAAAIAAAAyAAAAEOMwvh3+FZxqkdMBz2ekgGhwQ4A=", passhash.ErrMalformed},
		{"aspnet v3 PRF 3", "AQAAAAMAAAAyAAAAEOMwvh3+FZxqkdMBz2ekgGhwQ4B6pZWND6zgESBuWiHw", passhash.ErrMalformed},
		{"aspnet v3 salt beyond the blob", "AQAAAAIAAAAyAAAAIOMwvh3+FZxqkdMBz2ekgGhwQ4B6pZWND6zgESBuWiHw", passhash.ErrMalformed},
		{"aspnet v3 5,000,001 iterations", "AQAAAAIATEtBAAAAEOMwvh3+FZxqkdMBz2ekgGhwQ4B6pZWND6zgESBuWiHw", passhash.ErrTooCostly},
		{"aspnet v3 0 iterations", "AQAAAAIAAAAAAAAAEOMwvh3+FZxqkdMBz2ekgGhwQ4B6pZWND6zgESBuWiHw", passhash.ErrMalformed},

		{"md5 salted not hex", "md5$salt$zz", passhash.ErrMalformed},
		{"sha1 salted short", "sha1$salt$abcd", passhash.ErrMalformed},
		{"sha256 salted extra part", "sha256$a$b$" + strings.Repeat("0", 64), passhash.ErrMalformed},
		{"md5 unsalted not allowed", strings.Repeat("0", 32), passhash.ErrWeak},

		{"scrypt short key", "abcdef:0123", passhash.ErrMalformed},
		{"scrypt key not hex", "abcdef:" + strings.Repeat("zz", 64), passhash.ErrMalformed},
		{"scrypt empty salt", ":" + strings.Repeat("00", 64), passhash.ErrMalformed},
		{"scrypt second colon", "ab:cd:" + strings.Repeat("00", 63), passhash.ErrMalformed},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := passhash.Parse(c.stored, passhash.Options{})
			if c.want == nil {
				if err != nil {
					t.Fatalf("got %v, want it parsed", err)
				}
				return
			}
			if !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
			if len(c.stored) > 16 && strings.Contains(err.Error(), c.stored) {
				t.Errorf("the refusal %q quotes the stored value", err)
			}
		})
	}
}

// TestMicrosoftFailures: Microsoft's "incorrect password" and v3 "extra
// data at end" blobs parse, and do not verify "my password".
func TestMicrosoftFailures(t *testing.T) {
	for _, s := range []string{
		"AAABAgMEBQYHCAkKCwwNDg+uAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAALtH1uJg==",
		"AQAAAAAAAAD6AAAAEAhftMyfTJyAAAAAAAAAAAAAAAAAAAih5WsjXaR3PA9M",
		"AQAAAAIAAAAyAAAAEOMwvh3+FZxqkdMBz2ekgGhwQ4B6pZWND6zgESBuWiHwAAAAAAAAAAAA",
	} {
		h, err := passhash.Parse(s, passhash.Options{})
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		if h.Verify("my password") {
			t.Errorf("%s verifies", s)
		}
	}
}

// TestCost: what a verification takes, for the hashing slots.
func TestCost(t *testing.T) {
	for _, c := range []struct {
		stored string
		want   passhash.Cost
	}{
		{"$argon2id$v=19$m=65536,t=3,p=4$c2FsdHNhbHRzYWx0$aGFzaGhhc2hoYXNoaGFzaA", passhash.Cost{Memory: 64 << 20, Threads: 4}},
		{"$scrypt$ln=16,r=8,p=1$c2FsdHNhbHRzYWx0$aGFzaGhhc2hoYXNoaGFzaA", passhash.Cost{Memory: 64 << 20, Threads: 1}},
		{"0123456789abcdef0123456789abcdef:" + strings.Repeat("00", 64), passhash.Cost{Memory: 32 << 20, Threads: 1}},
		{"$2y$10$XnIFEy0XpvRAwZhqPMn87OgvGMlkXlqEHolm23XVNafI142X9m7nq", passhash.Cost{Threads: 1}},
	} {
		h, err := passhash.Parse(c.stored, passhash.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if got := h.Cost(); got != c.want {
			t.Errorf("%s: got %+v, want %+v", h.Format(), got, c.want)
		}
	}
}
