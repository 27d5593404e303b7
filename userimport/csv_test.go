package userimport_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/authsidecar/authsidecar/userimport"
)

// TestCSV: quoting (commas, doubled quotes and line breaks inside quotes),
// CRLF, a byte order mark, the header in any order and case, and the
// syntax errors a CSV can have: each refused by its line, reading going
// on at the next one.
func TestCSV(t *testing.T) {
	csvOpts := userimport.Options{Format: userimport.CSV}
	tests := []struct {
		name     string
		in       string
		refused  []string
		imported int
		// check, if set, looks at what was written.
		check func(t *testing.T, st *store)
	}{
		{"quoting", "\xef\xbb\xbfEmail, ID ,name,roles,email_verified\r\n" +
			"ann@example.com,1,\"Doe, Ann\",admin; ops;,TRUE\r\n" +
			"bob@example.com,2,\"Bob \"\"the\"\"\nBuilder\",,false\r\n" +
			"cy@example.com,3,Cy,,\r\n", nil, 3,
			func(t *testing.T, st *store) {
				st.wantUser(t, "1", "ann@example.com", "Doe, Ann", true)
				st.wantRoles(t, "1", "admin", "ops")
				st.wantUser(t, "2", "bob@example.com", "Bob \"the\"\nBuilder", false)
				st.wantUser(t, "3", "cy@example.com", "Cy", false)
			}},
		{"line numbers after a quoted line break", "email,name\n" +
			"a@example.com,\"two\nlines\"\n" +
			"b@,B\n" +
			"c@example.com,\"three\n\nlines\"\n" +
			"d@,D\n", []string{
			`line 4: email "b@" is not a valid address`,
			`line 8: email "d@" is not a valid address`,
		}, 2, nil},
		{"wrong number of fields", "email,name\na@example.com,A,extra\nb@example.com\nc@example.com,C\n", []string{
			"line 2: CSV: wrong number of fields",
			"line 3: CSV: wrong number of fields",
		}, 1, nil},
		{"bare quote", "email,name\na@example.com,Ann \"A\" Doe\nb@example.com,B\n", []string{
			`line 2: CSV: bare " in non-quoted-field`,
		}, 1, nil},
		{"quote not closed before the end", "email,name\na@example.com,A\nb@example.com,\"B\n", []string{
			`line 3: CSV: extraneous or missing " in quoted-field`,
		}, 1, nil},
		{"empty cells are not given", "id,email,name,email_verified,image,created_at,password_hash,roles\n,a@example.com,,,,,,\n", nil, 1,
			func(t *testing.T, st *store) {
				u, err := st.db.OperatorUserByEmail(context.Background(), "a@example.com")
				if err != nil || len(u.ID) != 32 || u.Image != nil || !u.CreatedAt.Equal(t0) {
					t.Errorf("got %+v %v, want a generated id, no image, created now", u, err)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := &store{db: openStore(t)}
			r := importText(t, st.db, tt.in, csvOpts)
			if r.err != nil {
				t.Fatalf("got error %v", r.err)
			}
			if !slices.Equal(r.refused, tt.refused) || r.sum.Imported != tt.imported {
				t.Errorf("got %d imported, refused %q; want %d, %q", r.sum.Imported, r.refused, tt.imported, tt.refused)
			}
			if tt.check != nil {
				tt.check(t, st)
			}
		})
	}
}

// TestCSVHeader: a header that does not name the fields stops the import
// before any line.
func TestCSVHeader(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"", "CSV: no header row: the first line names the columns (id, email, name, ...)"},
		{"email,phone\na@example.com,1\n", `CSV header: unknown column "phone" (the columns are id, email, name, email_verified, image, created_at, password_hash, roles)`},
		{"email,Email\n", "CSV header: column email twice"},
		{"id,name\n1,Ann\n", "CSV header: no email column"},
		{"email,\"name\n", `CSV header: parse error on line 1, column 13: extraneous or missing " in quoted-field`},
	} {
		db := openStore(t)
		r := importText(t, db, tt.in, userimport.Options{Format: userimport.CSV})
		if r.err == nil || r.err.Error() != tt.want {
			t.Errorf("%q: got %v, want %q", tt.in, r.err, tt.want)
		}
		if n, _ := db.Count(context.Background(), "user"); n != 0 {
			t.Errorf("%q: %d users written, want none", tt.in, n)
		}
	}
}

// TestCSVRecordTooLong: a quote never closed makes the rest of the file
// one record; reading stops after 64 KiB of it, what came before written.
func TestCSVRecordTooLong(t *testing.T) {
	db := openStore(t)
	in := "email,name\na@example.com,A\nb@example.com,\"" + strings.Repeat("never closed\n", 10_000)
	r := importText(t, db, in, userimport.Options{Format: userimport.CSV})
	want := "the record after line 2 is longer than 64 KiB (a quote never closed?): reading stops there"
	if r.err == nil || r.err.Error() != want {
		t.Fatalf("got %v, want %q", r.err, want)
	}
	if r.sum.Imported != 1 || r.sum.Bytes > 2*userimport.MaxLineBytes {
		t.Errorf("got %d imported after reading %d bytes; want 1, and at most 128 KiB read", r.sum.Imported, r.sum.Bytes)
	}
}
