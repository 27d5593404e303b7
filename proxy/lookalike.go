package proxy

import (
	"path"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"
)

// An upstream may read a path differently from the way we classify it:
// stacks that apply Unicode compatibility normalization (NFKC) to paths turn
// a fullwidth "Ａ" into "A", "．" and "․" into ".", "／" into "/"; routers
// that match ignoring case fold "ſ" to "s" and the Kelvin sign to "k"; some
// decode percent-escapes twice or accept overlong UTF-8. /%EF%BC%A1pi/tasks
// is a public path to us and /Api/tasks to such an upstream. Under /api
// every non-ASCII byte and every encoded "%" is already refused (path.go),
// so what is left is a path outside /api, or outside any configured
// prefix, that becomes one on the way.
//
// checkLookalikes refuses a path when any of its readings, under any
// composition of the reductions below, falls in a class other than the
// path's own (or another admin route), unless that class is public: such a
// request is either an attack or a client bug, and serving it would hand a
// protected route to whoever sent it. Ordinary non-ASCII paths (/café,
// /files/été.pdf) read as public paths every way and pass.

const (
	// maxLookalikePath bounds the decoded path checked at all: a longer
	// one with a non-ASCII byte or a "%" is refused. Checking costs up to
	// a few hundred nanoseconds a byte, and common servers refuse request
	// lines over 8 KiB anyway (nginx, Apache), so no real client sends one.
	maxLookalikePath = 8 << 10
	// maxLookalikes bounds the readings explored. Real paths have a few
	// (/files/été.pdf two, /wiki/Straße five; one packed with İ ı ß ſ ﬁ K
	// and a fullwidth letter 25); one with more was built to have them.
	maxLookalikes = 64
	// lookalikeBudget bounds the bytes of all readings together: NFKC can
	// grow a path elevenfold (U+FDFA becomes 18 characters), and a 64 KiB
	// request line must not cost megabytes and milliseconds to check.
	lookalikeBudget = 256 << 10
)

// lookalikeReductions are the ways an upstream may rewrite a decoded path
// before routing it. Each is applied to every reading found so far, until
// no new reading appears.
var lookalikeReductions = [...]func(string) string{
	norm.NFKC.String,
	foldCase,
	strings.ToLower, // İ (U+0130) lowers to i; full folding makes it i + U+0307
	strings.ToUpper, // ı (U+0131) uppers to I; it has no folding
	unescapeLenient,
	dropIgnorable,
	decodeOverlong,
	resolveDots,
}

// needsLookalikeCheck reports whether path could read differently to an
// upstream that normalizes: ASCII is fixed under NFKC and the reductions
// above, except for "%" (a second decoding). It runs on every request, so
// it must not allocate.
func needsLookalikeCheck(path string) bool {
	for i := 0; i < len(path); i++ {
		if c := path[i]; c >= utf8.RuneSelf || c == '%' {
			return true
		}
	}
	return false
}

// checkLookalikes returns an errBadPath when a reading of path lands in a
// non-public class other than class (or in another admin route than
// admin). class and admin are what lookup said of path itself.
func (r *router) checkLookalikes(path string, class Class, admin int) error {
	if len(path) > maxLookalikePath {
		return errBadPath("path with non-ASCII or % longer than 8 KiB")
	}
	seen := map[string]bool{path: true}
	queue := []string{path}
	budget := lookalikeBudget
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		for _, reduce := range lookalikeReductions {
			v := reduce(s)
			if seen[v] {
				continue
			}
			if len(seen) >= maxLookalikes || len(v) > budget {
				return errBadPath("path has too many readings under Unicode normalization")
			}
			budget -= len(v)
			seen[v] = true
			if c, i := r.lookup(v, true); c != ClassPublic && (c != class || i != admin) {
				return errBadPath("path reads as another route after Unicode normalization")
			}
			queue = append(queue, v)
		}
	}
	return nil
}

// foldCase is full Unicode case folding (ß→ss, ſ→s, K→k). A Caser keeps
// state, so each call takes its own.
func foldCase(s string) string { return cases.Fold().String(s) }

// unescapeLenient decodes every valid %XX and leaves the rest, as an
// upstream that decodes a second time would.
func unescapeLenient(s string) string {
	i := strings.IndexByte(s, '%')
	if i < 0 {
		return s
	}
	b := make([]byte, 0, len(s))
	b = append(b, s[:i]...)
	for ; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
			b = append(b, unhex(s[i+1])<<4|unhex(s[i+2]))
			i += 2
			continue
		}
		b = append(b, s[i])
	}
	return string(b)
}

// dropIgnorable removes default-ignorable code points (soft hyphen,
// zero-width space and joiners, variation selectors, BOM), which NFKC keeps
// but NFKC_Casefold, IDNA and some search-style normalizers delete:
// /ap%C2%ADi is /api to them.
func dropIgnorable(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.In(r, unicode.Cf, unicode.Variation_Selector, unicode.Other_Default_Ignorable_Code_Point) {
			return -1
		}
		return r
	}, s)
}

// decodeOverlong replaces overlong UTF-8 sequences (C0 AE for ".", E0 80 AF
// for "/") with the code point a decoder that skips the minimality check
// would produce. Valid UTF-8 is returned as is.
func decodeOverlong(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b []byte
	last := 0
	for i := 0; i < len(s); i++ {
		var r rune
		n := 0
		switch c := s[i]; {
		case (c == 0xC0 || c == 0xC1) && isCont(s, i+1, 1):
			r, n = rune(c&0x1F)<<6|rune(s[i+1]&0x3F), 2
		case c == 0xE0 && i+1 < len(s) && s[i+1] < 0xA0 && isCont(s, i+1, 2):
			r, n = rune(s[i+1]&0x3F)<<6|rune(s[i+2]&0x3F), 3
		case c == 0xF0 && i+1 < len(s) && s[i+1] < 0x90 && isCont(s, i+1, 3):
			r, n = rune(s[i+1]&0x3F)<<12|rune(s[i+2]&0x3F)<<6|rune(s[i+3]&0x3F), 4
		default:
			continue
		}
		b = append(b, s[last:i]...)
		b = utf8.AppendRune(b, r)
		i += n - 1
		last = i + 1
	}
	if b == nil {
		return s
	}
	return string(append(b, s[last:]...))
}

// isCont reports whether s[i:i+n] are n UTF-8 continuation bytes.
func isCont(s string, i, n int) bool {
	if i+n > len(s) {
		return false
	}
	for j := i; j < i+n; j++ {
		if s[j]&0xC0 != 0x80 {
			return false
		}
	}
	return true
}

// resolveDots reads the path the way a lenient router does: query and
// fragment cut off (NFKC makes "？" a "?"), backslashes as slashes,
// ";parameters" dropped from each segment, dot segments and empty segments
// removed. The trailing slash is kept: it matters to exact routes.
func resolveDots(s string) string {
	if i := strings.IndexAny(s, "?#"); i >= 0 {
		s = s[:i]
	}
	s = strings.ReplaceAll(s, `\`, "/")
	if strings.IndexByte(s, ';') >= 0 {
		segs := strings.Split(s, "/")
		for i, seg := range segs {
			segs[i], _, _ = strings.Cut(seg, ";")
		}
		s = strings.Join(segs, "/")
	}
	c := path.Clean("/" + s)
	if strings.HasSuffix(s, "/") && c != "/" {
		c += "/"
	}
	return c
}
