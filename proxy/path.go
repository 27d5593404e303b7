package proxy

import "strings"

// errBadPath is refused with 400 before classification; the message says
// what was wrong and is safe to show.
type errBadPath string

func (e errBadPath) Error() string { return string(e) }

// canonicalPath returns the decoded path of a request-target, or an error
// when the target is not already canonical. Everything that could make two
// parsers (ours and the upstream's) disagree about the path is refused
// rather than normalized: dot segments and segments ending in a dot or a
// space, empty segments, encoded slashes and backslashes, parameters (;), fragments,
// control bytes, and, under /api, anything but plain ASCII written the one
// way.
func canonicalPath(requestURI string) (string, error) {
	raw, _, _ := strings.Cut(requestURI, "?")
	if raw == "" || raw[0] != '/' {
		// Absolute-form (http://h/x), opaque (http:api/x), asterisk (*).
		return "", errBadPath("request target must be an absolute path")
	}
	if fastCanonical(raw) {
		return raw, nil
	}
	return decodeCanonical(raw)
}

// decodeCanonical is the full check: it decodes escapes and refuses every
// ambiguous form.
func decodeCanonical(raw string) (string, error) {
	// Escapes that are harmless elsewhere are refused under /api; whether
	// the path is under /api is known only once it is decoded (/%61pi).
	var apiOnly string
	var b strings.Builder
	b.Grow(len(raw))
	segStart := 0 // index in b of the current segment's first byte
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		switch {
		case c == '%':
			if i+2 >= len(raw) || !isHex(raw[i+1]) || !isHex(raw[i+2]) {
				return "", errBadPath("malformed percent-encoding")
			}
			d := unhex(raw[i+1])<<4 | unhex(raw[i+2])
			switch {
			case d < 0x20 || d == 0x7f:
				return "", errBadPath("encoded control byte in path")
			case d == '/' || d == '\\':
				return "", errBadPath("encoded slash or backslash in path")
			case d == ';' || d == '#' || d == '?':
				return "", errBadPath("encoded ; # or ? in path")
			case d == '.':
				return "", errBadPath("encoded dot in path")
			case apiOnly != "":
			case d == ',' || d == '=':
				apiOnly = "encoded , or = in an /api path"
			case d == '%':
				// A decoded "%" would be decoded again by an upstream
				// that unescapes twice: %255c becomes a backslash.
				apiOnly = "encoded % in an /api path"
			case d >= 0x80:
				apiOnly = "non-ASCII in an /api path"
			case isUnreserved(d):
				apiOnly = "needlessly percent-encoded character in an /api path"
			}
			b.WriteByte(d)
			i += 2
		case c < 0x20 || c == 0x7f:
			return "", errBadPath("control byte in path")
		case c >= 0x80:
			return "", errBadPath("raw non-ASCII byte in path")
		case c == '\\':
			return "", errBadPath("backslash in path")
		case c == ';':
			return "", errBadPath("; in path")
		case c == '#':
			return "", errBadPath("# in path")
		case c == '/':
			if i > 0 {
				if err := checkSegment(b.String()[segStart:]); err != nil {
					return "", err
				}
				if raw[i-1] == '/' {
					return "", errBadPath("empty path segment (//)")
				}
			}
			b.WriteByte(c)
			segStart = b.Len()
		default:
			b.WriteByte(c)
		}
	}
	if err := checkSegment(b.String()[segStart:]); err != nil {
		return "", err
	}
	path := b.String()
	if apiOnly != "" && apiRoute.matchFold(path) {
		return "", errBadPath(apiOnly)
	}
	return path, nil
}

// checkSegment refuses dot segments, and any segment ending in a dot or a
// space (decoded: a raw space cannot be in a request line): Windows (IIS,
// and any file server on NTFS) drops a segment's trailing dots and
// spaces, so /api/admin./x and /api%20/admin/x would be /api/admin/x
// there.
func checkSegment(seg string) error {
	switch {
	case seg == "." || seg == "..":
		return errBadPath("dot segment in path")
	case endsInDot(seg) || strings.HasSuffix(seg, " "):
		return errBadPath("path segment ending in a dot or a space")
	}
	return nil
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}

// isUnreserved is RFC 3986's unreserved set: encoding these changes
// nothing for a conforming parser and only helps to dodge a prefix match.
func isUnreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~'
}

// fastCanonical accepts, without decoding or allocating, the common path:
// only unreserved characters, "/" and a few sub-delimiters, no escapes, no
// empty segments, none ending in a dot (dot segments included). Anything
// else takes the full check.
func fastCanonical(raw string) bool {
	segStart := 0
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		switch {
		case c == '/':
			if i > 0 && (i == segStart || endsInDot(raw[segStart:i])) {
				return false
			}
			segStart = i + 1
		case isUnreserved(c), c == '!', c == '$', c == '&', c == '\'', c == '(', c == ')', c == '*', c == '+', c == ',', c == '=', c == ':', c == '@':
		default:
			return false
		}
	}
	return !endsInDot(raw[segStart:])
}

func endsInDot(seg string) bool { return seg != "" && seg[len(seg)-1] == '.' }
