package betterauth

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The columns are scanned into any and read here, so that one reading
// serves both engines and what their drivers make of Better Auth's
// types: PostgreSQL's text, boolean and timestamptz; SQLite's text,
// integer 0/1 and dates stored as ISO 8601 text (or, from other
// adapters' schemas, Unix milliseconds).

// text reads a text column; NULL is "".
func text(v any) (string, error) {
	switch x := v.(type) {
	case nil:
		return "", nil
	case string:
		return x, nil
	case []byte:
		return string(x), nil
	case int64:
		return strconv.FormatInt(x, 10), nil // a serial id
	}
	return "", fmt.Errorf("want text, got %T", v)
}

// boolean reads a boolean column; NULL is false.
func boolean(v any) (bool, error) {
	switch x := v.(type) {
	case nil:
		return false, nil
	case bool:
		return x, nil
	case int64:
		return x != 0, nil
	case string, []byte:
		s, _ := text(x)
		switch strings.ToLower(s) {
		case "1", "true", "t":
			return true, nil
		case "0", "false", "f", "":
			return false, nil
		}
	}
	return false, fmt.Errorf("want a boolean, got %v", v)
}

// minUnixMS is the smallest integer read as Unix milliseconds; a smaller
// one (before 1973) is Unix seconds.
const minUnixMS = 100_000_000_000

// dateLayouts are the spellings of a date SQLite may hold as text:
// JavaScript's toISOString, and SQLite's own.
var dateLayouts = []string{time.RFC3339Nano, "2006-01-02 15:04:05.999999999Z07:00", "2006-01-02 15:04:05.999999999", "2006-01-02T15:04:05.999999999"}

// instant reads a date column; NULL is the zero time. It is truncated to
// milliseconds, the sidecar's unit.
func instant(v any) (time.Time, error) {
	var t time.Time
	switch x := v.(type) {
	case nil:
		return t, nil
	case time.Time:
		t = x
	case int64:
		t = unix(x)
	case float64:
		t = unix(int64(x))
	case string, []byte:
		s, _ := text(x)
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			t = unix(n)
			break
		}
		var err error
		for _, layout := range dateLayouts {
			if t, err = time.Parse(layout, s); err == nil {
				break
			}
		}
		if err != nil {
			return t, fmt.Errorf("want a date, got %q", s)
		}
	default:
		return t, fmt.Errorf("want a date, got %T", v)
	}
	return t.UTC().Truncate(time.Millisecond), nil
}

func unix(n int64) time.Time {
	if n < minUnixMS {
		return time.Unix(n, 0)
	}
	return time.UnixMilli(n)
}
