package userimport

import (
	"bufio"
	"bytes"
	"errors"
	"io"

	"github.com/authsidecar/authsidecar/internal/strictjson"
)

// jsonlSource reads JSON Lines: one object per line, blank lines ignored.
type jsonlSource struct {
	in   *counter
	br   *bufio.Reader
	line int
	// read is what next has consumed, of what br buffered.
	read int64
}

func newJSONL(r io.Reader) *jsonlSource {
	in := &counter{r: r}
	return &jsonlSource{in: in, br: bufio.NewReaderSize(in, MaxLineBytes)}
}

func (s *jsonlSource) offset() int64 { return s.read }

func (s *jsonlSource) next(l *rawLine) error {
	for {
		b, err := s.br.ReadSlice('\n')
		s.read += int64(len(b))
		s.line++
		if errors.Is(err, bufio.ErrBufferFull) {
			return s.skipLong()
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		if s.line == 1 {
			b = bytes.TrimPrefix(b, []byte(bom))
		}
		if len(bytes.TrimSpace(b)) == 0 {
			if err != nil {
				return io.EOF
			}
			continue
		}
		l.reset(s.line)
		return decodeLine(l, b)
	}
}

// skipLong discards the rest of a line longer than MaxLineBytes.
func (s *jsonlSource) skipLong() error {
	line := s.line
	for {
		b, err := s.br.ReadSlice('\n')
		s.read += int64(len(b))
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		return refuse(line, "line longer than %d KiB", MaxLineBytes>>10)
	}
}

// decodeLine reads one JSON object into l: each member by its exact name,
// a repeated or unknown one refused.
func decodeLine(l *rawLine, b []byte) error {
	err := strictjson.Members(b, func(name, value []byte) error {
		f := fieldIndex(string(name))
		if f < 0 {
			return refuse(l.line, "unknown field %s (the fields are id, email, name, email_verified, image, created_at, password_hash, roles)", quote(string(name)))
		}
		if string(value) == "null" {
			return nil
		}
		switch f {
		case fID, fCreatedAt:
			// An integer id or Unix milliseconds, as their digits.
			if isInteger(value) {
				l.set(f, string(value))
				return nil
			}
			if s, ok := strictjson.String(value); ok {
				l.set(f, string(s))
				return nil
			}
			return refuse(l.line, "%s: want a string or an integer", fieldNames[f])
		case fEmailVerified:
			switch string(value) {
			case "true", "false":
				l.set(f, string(value))
				return nil
			}
			return refuse(l.line, "email_verified: want true or false")
		case fRoles:
			ok, err := strictjson.Elements(value, func(elem []byte) error {
				s, ok := strictjson.String(elem)
				if !ok {
					return refuse(l.line, "roles: want a list of strings")
				}
				l.roles = append(l.roles, string(s))
				return nil
			})
			if !ok {
				return refuse(l.line, "roles: want a list of strings")
			}
			return err
		}
		s, ok := strictjson.String(value)
		if !ok {
			return refuse(l.line, "%s: want a string", fieldNames[f])
		}
		l.set(f, string(s))
		return nil
	})
	var le *lineError
	switch {
	case err == nil, errors.As(err, &le):
		return err
	case errors.Is(err, strictjson.ErrInvalid):
		return refuse(l.line, "not valid JSON")
	case errors.Is(err, strictjson.ErrNotObject):
		return refuse(l.line, "not a JSON object")
	}
	return refuse(l.line, "%v", err) // a repeated member
}

// isInteger reports whether a JSON value is an integer literal: an
// optional minus and digits.
func isInteger(v []byte) bool {
	if len(v) > 0 && v[0] == '-' {
		v = v[1:]
	}
	if len(v) == 0 {
		return false
	}
	for _, c := range v {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
