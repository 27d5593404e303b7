// Package strictjson checks JSON for what encoding/json lets through:
// repeated member names. Two parsers that resolve a duplicate differently
// (first wins, last wins) read different values from the same bytes, which
// is how validation gets bypassed, so authsidecar refuses such input in
// request bodies and in JWT headers and payloads.
package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"
)

// ErrInvalid is returned for input that is not one valid JSON value.
var ErrInvalid = errors.New("invalid JSON")

// ErrNotObject is returned by Members for valid JSON that is not an object.
var ErrNotObject = errors.New("not a JSON object")

// maxDepth is encoding/json's nesting limit: deeper input is invalid to
// json.Valid, and so to us; it also bounds the walk's recursion.
const maxDepth = 10000

// CheckDuplicates returns an error if data is not exactly one valid JSON
// value or if any object in it repeats a member name. Names are compared
// as encoding/json decodes them: "\u0061" and "a" are the same name.
// Invalid JSON is ErrInvalid, whatever else is wrong with it.
//
// One pass validates (accepting exactly what json.Valid accepts; the fuzz
// test holds it to that) and compares names. It replaced json.Valid and a
// walk after it (~3.3 µs per JWT payload), which had replaced a
// json.Decoder.Token walk (~25 µs).
func CheckDuplicates(data []byte) error {
	w := walker{b: data}
	return w.document()
}

// Members checks data as CheckDuplicates does and, if it is an object,
// calls fn with the decoded name and the raw value of each top-level
// member, in order; after an error from fn it calls fn no more, and that
// error is returned unless the input is invalid or repeats a name. It is
// how a reader decodes only the members it needs, by exact name (not
// encoding/json's case-insensitive match), in the one pass that also
// validates and checks for duplicates.
func Members(data []byte, fn func(name, value []byte) error) error {
	w := walker{b: data}
	w.space()
	if w.i >= len(w.b) || w.b[w.i] != '{' {
		if err := w.document(); errors.Is(err, ErrInvalid) {
			return err
		}
		return ErrNotObject
	}
	w.fn = fn
	return w.document()
}

// String decodes value, the raw bytes of one JSON string (such as a value
// Members passed on), as encoding/json would. ok is false if value is not
// exactly one valid JSON string.
func String(value []byte) (s []byte, ok bool) {
	if len(value) < 2 || value[0] != '"' {
		return nil, false
	}
	w := walker{b: value}
	s, ok = w.str()
	return s, ok && w.i == len(value)
}

// Elements calls fn with the raw bytes of each element of value, a JSON
// array, in order, and stops at fn's first error. ok is false if value is
// not one valid JSON array without repeated names.
func Elements(value []byte, fn func(elem []byte) error) (ok bool, err error) {
	w := walker{b: value}
	if w.document() != nil {
		return false, nil
	}
	w = walker{b: value}
	w.space()
	if w.b[w.i] != '[' {
		return false, nil
	}
	w.i++
	w.space()
	if w.b[w.i] == ']' {
		return true, nil
	}
	for {
		w.space()
		start := w.i
		if err := w.value(); err != nil {
			return false, err
		}
		if err := fn(w.b[start:w.i]); err != nil {
			return true, err
		}
		w.space()
		c := w.b[w.i]
		w.i++ // ',' or ']'
		if c == ']' {
			return true, nil
		}
	}
}

// walker validates JSON in one pass. value returns only ErrInvalid; a
// repeated name or an error from fn is kept until the walk ends, so that
// invalid input is always reported as such.
type walker struct {
	b     []byte
	i     int
	depth int
	// fn, if set, receives the members of the outermost object (Members).
	fn      func(name, value []byte) error
	dupErr  error
	fnErr   error
	skipped bool // fn returned an error: call it no more
}

// document is one value with nothing but whitespace around it.
func (w *walker) document() error {
	if err := w.value(); err != nil {
		return err
	}
	w.space()
	if w.i != len(w.b) {
		return ErrInvalid
	}
	if w.dupErr != nil {
		return w.dupErr
	}
	return w.fnErr
}

func (w *walker) space() {
	for w.i < len(w.b) {
		switch w.b[w.i] {
		case ' ', '\t', '\n', '\r':
			w.i++
		default:
			return
		}
	}
}

func (w *walker) value() error {
	w.space()
	if w.i >= len(w.b) {
		return ErrInvalid
	}
	switch c := w.b[w.i]; {
	case c == '{':
		return w.object()
	case c == '[':
		return w.array()
	case c == '"':
		if _, ok := w.str(); !ok {
			return ErrInvalid
		}
		return nil
	case c == '-' || '0' <= c && c <= '9':
		return w.number()
	case c == 't':
		return w.literal("true")
	case c == 'f':
		return w.literal("false")
	case c == 'n':
		return w.literal("null")
	}
	return ErrInvalid
}

func (w *walker) literal(lit string) error {
	if !bytes.HasPrefix(w.b[w.i:], []byte(lit)) {
		return ErrInvalid
	}
	w.i += len(lit)
	return nil
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// number steps over -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?; what
// follows it is the caller's to judge.
func (w *walker) number() error {
	b, i := w.b, w.i
	if b[i] == '-' {
		i++
	}
	switch {
	case i >= len(b):
		return ErrInvalid
	case b[i] == '0':
		i++
	case isDigit(b[i]):
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	default:
		return ErrInvalid
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || !isDigit(b[i]) {
			return ErrInvalid
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || !isDigit(b[i]) {
			return ErrInvalid
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	w.i = i
	return nil
}

// enter steps into the array or object at w.i, one level deeper; empty
// reports that it closed at once with end (and was stepped over).
func (w *walker) enter(end byte) (empty bool, err error) {
	if w.depth++; w.depth > maxDepth {
		return false, ErrInvalid
	}
	w.i++ // '[' or '{'
	w.space()
	if w.i < len(w.b) && w.b[w.i] == end {
		w.i++
		w.depth--
		return true, nil
	}
	return false, nil
}

// next steps over what follows an element or member: a comma (done is
// false, another comes) or end, which leaves the level (done is true).
func (w *walker) next(end byte) (done bool, err error) {
	w.space()
	if w.i >= len(w.b) {
		return false, ErrInvalid
	}
	c := w.b[w.i]
	w.i++
	switch c {
	case end:
		w.depth--
		return true, nil
	case ',':
		return false, nil
	}
	return false, ErrInvalid
}

func (w *walker) array() error {
	if empty, err := w.enter(']'); empty || err != nil {
		return err
	}
	for {
		if err := w.value(); err != nil {
			return err
		}
		if done, err := w.next(']'); done || err != nil {
			return err
		}
	}
}

func (w *walker) object() error {
	if empty, err := w.enter('}'); empty || err != nil {
		return err
	}
	// Objects in tokens and request bodies have a handful of members: the
	// first 16 names are compared in a fixed array (no allocation), the
	// rest go to a map, so a hostile body with thousands of members costs
	// linear time.
	var seen [16][]byte
	n := 0
	var many map[string]bool
	fn := w.fn
	w.fn = nil // nested objects are only checked
	for {
		w.space()
		if w.i >= len(w.b) || w.b[w.i] != '"' {
			return ErrInvalid
		}
		name, ok := w.str()
		if !ok {
			return ErrInvalid
		}
		dup := many[string(name)]
		for _, s := range seen[:n] {
			dup = dup || bytes.Equal(s, name)
		}
		if dup && w.dupErr == nil {
			w.dupErr = fmt.Errorf("duplicate member %q", name)
		}
		if n < len(seen) {
			seen[n] = name
			n++
		} else {
			if many == nil {
				many = make(map[string]bool)
			}
			many[string(name)] = true
		}
		w.space()
		if w.i >= len(w.b) || w.b[w.i] != ':' {
			return ErrInvalid
		}
		w.i++
		w.space()
		start := w.i
		if err := w.value(); err != nil {
			return err
		}
		if fn != nil && !w.skipped {
			if err := fn(name, w.b[start:w.i]); err != nil {
				w.fnErr, w.skipped = err, true
			}
		}
		if done, err := w.next('}'); done || err != nil {
			return err
		}
	}
}

// str steps over the string at w.i, validating it, and returns its
// decoded value: the raw bytes when they hold no escape and are valid
// UTF-8 (encoding/json would turn invalid bytes into U+FFFD), else what
// encoding/json makes of them. ok is false for an invalid string.
func (w *walker) str() (name []byte, ok bool) {
	start := w.i // the opening quote
	plain := true
	i := start + 1
	for ; ; i++ {
		if i >= len(w.b) {
			return nil, false
		}
		c := w.b[i]
		if c == '"' {
			break
		}
		if c < 0x20 {
			return nil, false
		}
		if c != '\\' {
			continue
		}
		plain = false
		if i++; i >= len(w.b) {
			return nil, false
		}
		switch w.b[i] {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		case 'u':
			if i+4 >= len(w.b) {
				return nil, false
			}
			for _, h := range w.b[i+1 : i+5] {
				if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
					return nil, false
				}
			}
			i += 4
		default:
			return nil, false
		}
	}
	w.i = i + 1
	raw := w.b[start+1 : i]
	if plain && utf8.Valid(raw) {
		return raw, true
	}
	var s string
	if err := json.Unmarshal(w.b[start:w.i], &s); err != nil {
		return nil, false
	}
	return []byte(s), true
}
