package userimport

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/authsidecar/authsidecar/issuer"
	"github.com/authsidecar/authsidecar/passhash"
)

// The fields of a line, as JSON keys and CSV columns.
const (
	fID = iota
	fEmail
	fName
	fEmailVerified
	fImage
	fCreatedAt
	fPasswordHash
	fRoles
	numFields
)

var fieldNames = [numFields]string{"id", "email", "name", "email_verified", "image", "created_at", "password_hash", "roles"}

// fieldIndex returns the index of a field name, or -1.
func fieldIndex(name string) int {
	for i, n := range fieldNames {
		if n == name {
			return i
		}
	}
	return -1
}

// MaxImageBytes bounds an image: a URL, not the picture (a data: URL is
// refused).
const MaxImageBytes = 2048

// minUnixMS is the smallest created_at read as Unix milliseconds: a
// smaller number (before 1973-03-03) is almost surely Unix seconds.
const minUnixMS = 100_000_000_000

// rawLine is one line's fields as text, before they are checked. An
// absent field, JSON's null and an empty CSV cell are all "not given".
type rawLine struct {
	line int
	vals [numFields]string
	has  [numFields]bool
	// roles is the JSON list of roles; CSV's cell is vals[fRoles].
	roles []string
}

func (l *rawLine) reset(line int) {
	l.line = line
	l.vals = [numFields]string{}
	l.has = [numFields]bool{}
	l.roles = l.roles[:0]
}

func (l *rawLine) set(f int, v string) {
	l.vals[f], l.has[f] = v, v != ""
}

// checker turns raw lines into records.
type checker struct {
	now    time.Time
	hashes passhash.Options
	newID  func() (string, error)
}

// roleRE is the rule "roles grant" applies.
var roleRE = regexp.MustCompile(`^[a-z0-9_-]+$`)

// record checks l. A refusal is the reason, in words for the operator.
func (c *checker) record(l *rawLine) (Record, string) {
	r := Record{Line: l.line, CreatedAt: c.now}
	if !l.has[fEmail] {
		return r, "email missing"
	}
	if e := l.vals[fEmail]; !issuer.ValidEmail(e) {
		return r, fmt.Sprintf("email %s is not a valid address", quote(e))
	}
	r.Email = strings.ToLower(l.vals[fEmail])
	if l.has[fID] {
		if r.ID = l.vals[fID]; !issuer.ValidUserID(r.ID) {
			return r, fmt.Sprintf("id %s: want 1 to %d bytes of [A-Za-z0-9._:@-]", quote(r.ID), issuer.MaxUserIDBytes)
		}
	}
	if l.has[fName] {
		r.Name, r.Given = l.vals[fName], r.Given|FieldName
		if reason := text("name", r.Name, issuer.MaxNameBytes); reason != "" {
			return r, reason
		}
	}
	if l.has[fEmailVerified] {
		switch v := strings.ToLower(l.vals[fEmailVerified]); v {
		case "true", "1":
			r.EmailVerified = true
		case "false", "0":
		default:
			return r, fmt.Sprintf("email_verified %s: want true or false", quote(l.vals[fEmailVerified]))
		}
		r.Given |= FieldEmailVerified
	}
	if l.has[fImage] {
		image := l.vals[fImage]
		if reason := text("image", image, MaxImageBytes); reason != "" {
			return r, reason
		}
		r.Image, r.Given = &image, r.Given|FieldImage
	}
	if l.has[fCreatedAt] {
		t, reason := c.instant(l.vals[fCreatedAt])
		if reason != "" {
			return r, reason
		}
		r.CreatedAt, r.Given = t, r.Given|FieldCreatedAt
	}
	if l.has[fPasswordHash] {
		h, err := passhash.Parse(l.vals[fPasswordHash], c.hashes)
		if err != nil {
			return r, "password_hash: " + err.Error()
		}
		r.PasswordHash, r.HashFormat, r.Given = l.vals[fPasswordHash], h.Format(), r.Given|FieldPasswordHash
	}
	roles := l.roles
	if l.has[fRoles] {
		// CSV's "admin;ops", spaces and a trailing ";" allowed.
		roles = strings.Split(l.vals[fRoles], ";")
		for i := range roles {
			roles[i] = strings.TrimSpace(roles[i])
		}
	}
	for _, role := range roles {
		if role == "" && l.has[fRoles] {
			continue
		}
		if !roleRE.MatchString(role) {
			return r, fmt.Sprintf("role %s: want [a-z0-9_-]+", quote(role))
		}
		if !slices.Contains(r.Roles, role) {
			r.Roles = append(r.Roles, role)
		}
		r.Given |= FieldRoles
	}
	if !l.has[fID] {
		id, err := c.newID()
		if err != nil {
			return r, err.Error()
		}
		r.ID, r.GeneratedID = id, true
	}
	return r, ""
}

// instant reads created_at: RFC 3339, or Unix milliseconds.
func (c *checker) instant(v string) (time.Time, string) {
	var t time.Time
	if ms, err := strconv.ParseInt(v, 10, 64); err == nil {
		if ms < minUnixMS {
			return t, fmt.Sprintf("created_at %s: Unix milliseconds before 1973; Unix seconds? multiply by 1000", quote(v))
		}
		t = time.UnixMilli(ms).UTC()
	} else if t, err = time.Parse(time.RFC3339Nano, v); err != nil || t.Year() < 1970 {
		return t, fmt.Sprintf("created_at %s: want RFC 3339 (2006-01-02T15:04:05Z) or Unix milliseconds", quote(v))
	}
	if t.After(c.now.Add(24 * time.Hour)) {
		return t, fmt.Sprintf("created_at %s is in the future", quote(v))
	}
	return t.UTC().Truncate(time.Millisecond), ""
}

// text checks a free-text field: UTF-8, at most max bytes.
func text(field, v string, max int) string {
	if !utf8.ValidString(v) {
		return field + " is not valid UTF-8"
	}
	if len(v) > max {
		return fmt.Sprintf("%s of %d bytes, at most %d", field, len(v), max)
	}
	return ""
}

// quote shows a value from the file in a message: quoted, so that control
// characters and spaces show, and clipped.
func quote(s string) string {
	const max = 64
	if len(s) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		return strconv.Quote(s[:cut]) + "…"
	}
	return strconv.Quote(s)
}
