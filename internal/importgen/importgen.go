// Package importgen writes files of users for "authsidecar users import"
// to read: the benchmark's million lines (authsidecar-bench users-file)
// and the tests' thousands. Line i is always the same user, so a test can
// tell what any line should have become.
//
// The mix: 60% integer ids (in the file's order, as a legacy table's
// serial), 30% UUIDs, 10% no id (generated at import); emails in an
// order unrelated to the ids; 95% with a password hash, cycling through
// the test vectors of passhash (every format, made by the libraries of
// the systems that use it), 5% without; created_at as RFC 3339 and as
// Unix milliseconds; a few roles and images.
package importgen

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Vector is a password and its hash, made by another system's library.
type Vector struct {
	// Format is the hash's passhash.Format.
	Format   string
	Password string
	Hash     string
}

// LoadVectors reads passhash's test vectors from dir (passhash/testdata),
// in a fixed order, those of the formats keep keeps (nil: all).
func LoadVectors(dir string, keep func(format string) bool) ([]Vector, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	slices.Sort(files)
	var out []Vector
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			return nil, err
		}
		var f struct {
			Format  string `json:"format"`
			Vectors []struct {
				Password string `json:"password"`
				Hash     string `json:"hash"`
			} `json:"vectors"`
		}
		if err := json.Unmarshal(b, &f); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if keep != nil && !keep(f.Format) {
			continue
		}
		for _, v := range f.Vectors {
			out = append(out, Vector{Format: f.Format, Password: v.Password, Hash: v.Hash})
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no password hash vectors in %s", dir)
	}
	return out, nil
}

// User is what line i holds.
type User struct {
	// ID is "" for a line without one.
	ID            string
	Email         string
	Name          string
	EmailVerified bool
	Image         string
	CreatedAt     time.Time
	// Vector is the password and hash; nil for a line without.
	Vector *Vector
	Roles  []string
}

// epoch is the first user's created_at; user i was created i minutes
// later.
var epoch = time.Date(2015, 1, 1, 0, 0, 0, 0, time.UTC)

// Line returns the user of line i (0 for the first).
func Line(i int, vectors []Vector) User {
	h := mix(i)
	u := User{
		Email:         fmt.Sprintf("%08x.%d@example.com", uint32(h), i),
		Name:          "User " + strconv.Itoa(i),
		EmailVerified: i%3 != 0,
		CreatedAt:     epoch.Add(time.Duration(i) * time.Minute),
	}
	switch i % 10 {
	case 6, 7, 8:
		u.ID = fmt.Sprintf("%08x-%04x-4%03x-a%03x-%012x", uint32(h>>32), uint16(h), i%0x1000, (i>>12)%0x1000, i)
	case 9:
	default:
		u.ID = strconv.Itoa(100_000 + i)
	}
	if i%20 != 19 {
		u.Vector = &vectors[i%len(vectors)]
	}
	switch {
	case i%50 == 0:
		u.Roles = []string{"admin"}
	case i%7 == 0:
		u.Roles = []string{"editor", "viewer"}
	}
	if i%4 == 0 {
		u.Image = fmt.Sprintf("https://img.example.com/u/%d.png", i)
	}
	return u
}

// mix is splitmix64's finalizer: i's bits spread over the whole word.
func mix(i int) uint64 {
	z := uint64(i) + 0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// Write writes lines users, from line first on, as JSON Lines or (csv)
// CSV with a header.
func Write(w io.Writer, first, lines int, vectors []Vector, csvFormat bool) error {
	if csvFormat {
		return writeCSV(w, first, lines, vectors)
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for i := first; i < first+lines; i++ {
		u := Line(i, vectors)
		m := map[string]any{"email": u.Email, "name": u.Name, "email_verified": u.EmailVerified}
		if u.ID != "" {
			m["id"] = u.ID
			if n, err := strconv.Atoi(u.ID); err == nil && i%2 == 0 {
				m["id"] = n // JSON integers as exporters write them
			}
		}
		if i%2 == 0 {
			m["created_at"] = u.CreatedAt.Format(time.RFC3339)
		} else {
			m["created_at"] = u.CreatedAt.UnixMilli()
		}
		if u.Vector != nil {
			m["password_hash"] = u.Vector.Hash
		}
		if u.Roles != nil {
			m["roles"] = u.Roles
		}
		if u.Image != "" {
			m["image"] = u.Image
		}
		if err := enc.Encode(m); err != nil {
			return err
		}
	}
	return nil
}

func writeCSV(w io.Writer, first, lines int, vectors []Vector) error {
	cw := csv.NewWriter(w)
	cw.Write([]string{"id", "email", "name", "email_verified", "image", "created_at", "password_hash", "roles"})
	for i := first; i < first+lines; i++ {
		u := Line(i, vectors)
		created := u.CreatedAt.Format(time.RFC3339)
		if i%2 == 1 {
			created = strconv.FormatInt(u.CreatedAt.UnixMilli(), 10)
		}
		hash := ""
		if u.Vector != nil {
			hash = u.Vector.Hash
		}
		if err := cw.Write([]string{u.ID, u.Email, u.Name, strconv.FormatBool(u.EmailVerified), u.Image, created, hash, strings.Join(u.Roles, ";")}); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}
