package userimport_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/authsidecar/authsidecar/issuer"
	"github.com/authsidecar/authsidecar/userimport"
)

const (
	bcryptHash = "$2a$04$XnIFEy0XpvRAwZhqPMn87OgvGMlkXlqEHolm23XVNafI142X9m7nq" // passlib, "correct horse battery staple"
	md5Hash    = "9cc2ae8a1ba7a93da39b46fc1019c481"                             // the same password, unsalted MD5
)

// TestRefusals: each refused line is named by its number with the
// reason, nothing of it is written, and the lines around it are imported.
func TestRefusals(t *testing.T) {
	long := strings.Repeat("x", userimport.MaxLineBytes)
	tests := []struct {
		name string
		// in is the file: its lines refer to no user that exists, but
		// ann@example.com and id "1", which the store holds.
		in string
		o  userimport.Options
		// refused are the refused lines, in order; imported is how many
		// users were written.
		refused  []string
		imported int
	}{
		{"not JSON", lines(`{"email":"b@example.com"`, `{"email":"c@example.com"}`),
			userimport.Options{}, []string{"line 1: not valid JSON"}, 1},
		{"not an object", lines(`["b@example.com"]`, `"b@example.com"`),
			userimport.Options{}, []string{"line 1: not a JSON object", "line 2: not a JSON object"}, 0},
		{"unknown field", lines(`{"email":"b@example.com","emial":"x"}`),
			userimport.Options{}, []string{`line 1: unknown field "emial" (the fields are id, email, name, email_verified, image, created_at, password_hash, roles)`}, 0},
		{"repeated field", lines(`{"email":"b@example.com","email":"c@example.com"}`),
			userimport.Options{}, []string{`line 1: duplicate member "email"`}, 0},
		{"missing email", lines(`{"id":"7","name":"No Mail"}`, `{"id":"8","email":null}`, `{"id":"9","email":""}`),
			userimport.Options{}, []string{"line 1: email missing", "line 2: email missing", "line 3: email missing"}, 0},
		{"bad email", lines(`{"email":"b@example"}`, `{"email":"b c@example.com"}`, `{"email":42}`),
			userimport.Options{}, []string{`line 1: email "b@example" is not a valid address`, `line 2: email "b c@example.com" is not a valid address`, "line 3: email: want a string"}, 0},
		{"bad id", lines(`{"id":"a b","email":"b@example.com"}`, `{"id":"`+strings.Repeat("9", 129)+`","email":"c@example.com"}`,
			`{"id":"é","email":"d@example.com"}`, `{"id":4.5,"email":"e@example.com"}`, `{"id":true,"email":"f@example.com"}`, `{"id":"auth0|1","email":"g@example.com"}`),
			userimport.Options{}, []string{
				`line 1: id "a b": want 1 to 128 bytes of [A-Za-z0-9._:@-]`,
				`line 2: id "` + strings.Repeat("9", 64) + `"…: want 1 to 128 bytes of [A-Za-z0-9._:@-]`,
				`line 3: id "é": want 1 to 128 bytes of [A-Za-z0-9._:@-]`,
				"line 4: id: want a string or an integer",
				"line 5: id: want a string or an integer",
				`line 6: id "auth0|1": want 1 to 128 bytes of [A-Za-z0-9._:@-]`,
			}, 0},
		{"ids that fit", lines(`{"id":42,"email":"b@example.com"}`, `{"id":"550e8400-e29b-41d4-a716-446655440000","email":"c@example.com"}`,
			`{"id":"`+strings.Repeat("9", 128)+`","email":"d@example.com"}`, `{"id":"-7","email":"e@example.com"}`),
			userimport.Options{}, nil, 4},
		{"email_verified", lines(`{"email":"b@example.com","email_verified":"true"}`, `{"email":"c@example.com","email_verified":1}`),
			userimport.Options{}, []string{"line 1: email_verified: want true or false", "line 2: email_verified: want true or false"}, 0},
		{"name and image", lines(`{"email":"b@example.com","name":"`+strings.Repeat("n", 257)+`"}`,
			`{"email":"c@example.com","image":"`+strings.Repeat("i", 2049)+`"}`, `{"email":"d@example.com","name":["N"]}`),
			userimport.Options{}, []string{"line 1: name of 257 bytes, at most 256", "line 2: image of 2049 bytes, at most 2048", "line 3: name: want a string"}, 0},
		{"created_at", lines(`{"email":"b@example.com","created_at":"yesterday"}`, `{"email":"c@example.com","created_at":1700000000}`,
			`{"email":"d@example.com","created_at":"2999-01-01T00:00:00Z"}`, `{"email":"e@example.com","created_at":1.7e12}`,
			`{"email":"f@example.com","created_at":"2021-03-04T05:06:07+02:00"}`, `{"email":"g@example.com","created_at":1614827167000}`),
			userimport.Options{}, []string{
				`line 1: created_at "yesterday": want RFC 3339 (2006-01-02T15:04:05Z) or Unix milliseconds`,
				`line 2: created_at "1700000000": Unix milliseconds before 1973; Unix seconds? multiply by 1000`,
				`line 3: created_at "2999-01-01T00:00:00Z" is in the future`,
				"line 4: created_at: want a string or an integer",
			}, 2},
		{"password hashes", lines(`{"email":"b@example.com","password_hash":"hunter2"}`,
			`{"email":"c@example.com","password_hash":"$2a$10$short"}`,
			`{"email":"d@example.com","password_hash":"$2b$16$XnIFEy0XpvRAwZhqPMn87OgvGMlkXlqEHolm23XVNafI142X9m7nq"}`,
			`{"email":"e@example.com","password_hash":"`+md5Hash+`"}`,
			`{"email":"f@example.com","password_hash":"$1$saltsalt$qjXMvbEw8oaL.CzflDugX/"}`,
			`{"email":"g@example.com","password_hash":"`+bcryptHash+`"}`),
			userimport.Options{}, []string{
				"line 1: password_hash: unknown password hash format",
				"line 2: password_hash: malformed password hash: bcrypt is 60 characters, $2?$cost$ and 53 of salt and hash",
				"line 3: password_hash: password hash beyond the cost bounds: bcrypt cost 16, at most 15",
				"line 4: password_hash: weak password hash not allowed: md5",
				`line 5: password_hash: unknown password hash format: prefix "$1$"`,
			}, 1},
		{"weak hashes allowed", lines(`{"email":"b@example.com","password_hash":"` + md5Hash + `"}`),
			userimport.Options{AllowWeakHashes: true}, nil, 1},
		{"roles", lines(`{"email":"b@example.com","roles":["Admin"]}`, `{"email":"c@example.com","roles":"admin"}`,
			`{"email":"d@example.com","roles":["admin",7]}`, `{"email":"e@example.com","roles":[""]}`, `{"email":"f@example.com","roles":["admin","ops","admin"]}`),
			userimport.Options{}, []string{
				`line 1: role "Admin": want [a-z0-9_-]+`,
				"line 2: roles: want a list of strings",
				"line 3: roles: want a list of strings",
				`line 4: role "": want [a-z0-9_-]+`,
			}, 1},
		{"repeated in the file", lines(`{"id":"7","email":"b@example.com"}`, `{"id":"7","email":"c@example.com"}`,
			`{"id":"8","email":"B@Example.com"}`, `{"email":"c@example.com"}`, `{"id":"c@example.com","email":"d@example.com"}`),
			userimport.Options{}, []string{
				"line 2: id 7 repeats an earlier line's",
				"line 3: email b@example.com repeats an earlier line's",
			}, 3},
		{"a refused line reserves nothing", lines(`{"id":"7","email":"b@example.com","roles":["Bad"]}`, `{"id":"7","email":"b@example.com"}`,
			`{"id":"8","email":"b@example.com"}`, `{"id":"8","email":"c@example.com"}`),
			userimport.Options{}, []string{`line 1: role "Bad": want [a-z0-9_-]+`, "line 3: email b@example.com repeats an earlier line's"}, 2},
		{"against the store", lines(`{"id":"1","email":"b@example.com"}`, `{"email":"ANN@example.com"}`, `{"id":"2","email":"c@example.com"}`),
			userimport.Options{}, []string{
				"line 1: id 1 exists already (with email ann@example.com)",
				"line 2: email exists already (user 1)",
			}, 1},
		{"the same user in the store", lines(`{"id":"1","email":"ann@example.com"}`),
			userimport.Options{}, []string{"line 1: user 1 exists already with this email"}, 0},
		{"blank lines, a byte order mark and CRLF", "\xef\xbb\xbf{\"email\":\"b@example.com\"}\r\n\r\n  \n{\"email\":\"c@\"}\r\n{\"email\":\"d@example.com\"}",
			userimport.Options{}, []string{`line 4: email "c@" is not a valid address`}, 2},
		{"a line too long", lines(`{"email":"b@example.com"}`, `{"email":"c@example.com","name":"`+long+`"}`, `{"email":"d@example.com"}`),
			userimport.Options{}, []string{"line 2: line longer than 64 KiB"}, 2},
		{"refusals in line order across a batch", lines(`{"email":"ann@example.com"}`, `{"email":"x"}`, `{"email":"b@example.com"}`, `{"id":"1","email":"y@example.com"}`, `{"email":"z"}`),
			userimport.Options{BatchSize: 3}, []string{
				"line 1: email exists already (user 1)",
				`line 2: email "x" is not a valid address`,
				"line 4: id 1 exists already (with email ann@example.com)",
				`line 5: email "z" is not a valid address`,
			}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db := openStore(t)
			u := issuer.User{ID: "1", Name: "Ann", Email: "ann@example.com", CreatedAt: t0, UpdatedAt: t0}
			if err := db.CreateUser(context.Background(), u, "salt:hash", issuer.Session{}); err != nil {
				t.Fatal(err)
			}
			r := importText(t, db, tt.in, tt.o)
			if r.err != nil {
				t.Fatalf("got error %v", r.err)
			}
			if !slices.Equal(r.refused, tt.refused) {
				t.Errorf("refused:\n got %q\nwant %q", r.refused, tt.refused)
			}
			if r.sum.Refused != len(tt.refused) || r.sum.Imported != tt.imported {
				t.Errorf("got %d imported, %d refused; want %d, %d", r.sum.Imported, r.sum.Refused, tt.imported, len(tt.refused))
			}
			if n, _ := db.Count(context.Background(), "user"); n != 1+tt.imported {
				t.Errorf("users in the store: got %d, want %d", n, 1+tt.imported)
			}
			if n, _ := db.Count(context.Background(), "user_role"); n > tt.imported*2 {
				t.Errorf("roles in the store: got %d, want those of imported users only", n)
			}
		})
	}
}
