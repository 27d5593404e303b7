package userimport

import (
	"errors"
	"fmt"
	"io"
	"strings"
)

// Format is an input format.
type Format int

// The input formats (-format).
const (
	JSONL Format = iota
	CSV
)

// ParseFormat reads jsonl or csv.
func ParseFormat(s string) (Format, bool) {
	switch s {
	case "jsonl":
		return JSONL, true
	case "csv":
		return CSV, true
	}
	return 0, false
}

// FormatOf names a file's format by its extension: .jsonl and .ndjson,
// or .csv (any case). ok is false for any other.
func FormatOf(path string) (f Format, ok bool) {
	p := strings.ToLower(path)
	switch {
	case strings.HasSuffix(p, ".jsonl"), strings.HasSuffix(p, ".ndjson"):
		return JSONL, true
	case strings.HasSuffix(p, ".csv"):
		return CSV, true
	}
	return 0, false
}

// MaxLineBytes bounds a line (a CSV record, quoted line breaks included):
// a longer one is refused, so a file without line breaks, or a CSV quote
// never closed, cannot make the import hold it whole.
const MaxLineBytes = 64 << 10

// bom is the UTF-8 byte order mark some exporters (Excel) start with.
const bom = "\xef\xbb\xbf"

// source yields a file's lines.
type source interface {
	// next fills l with the next line. io.EOF: no more. A *lineError
	// refuses one line and reading goes on; any other error ends it.
	next(l *rawLine) error
	// offset is how many bytes of the file were read.
	offset() int64
}

// lineError refuses one line.
type lineError struct {
	line   int
	reason string
}

func (e *lineError) Error() string { return fmt.Sprintf("line %d: %s", e.line, e.reason) }

func refuse(line int, format string, args ...any) error {
	return &lineError{line: line, reason: fmt.Sprintf(format, args...)}
}

// counter counts the bytes read through it.
type counter struct {
	r io.Reader
	n int64
}

func (c *counter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// errLineTooLong ends a CSV read that found no end of record within
// MaxLineBytes.
var errLineTooLong = errors.New("record longer than 64 KiB")
