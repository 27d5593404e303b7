// Package errlist handles errors that hold several problems (errors.Join),
// for callers that print one problem a line, as `authsidecar check` does.
package errlist

import (
	"errors"
	"fmt"
)

// Prefix puts prefix before each error err joins, so every line printed
// from the result keeps its context. A nil err stays nil.
func Prefix(prefix string, err error) error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var errs []error
		for _, e := range j.Unwrap() {
			errs = append(errs, Prefix(prefix, e))
		}
		return errors.Join(errs...)
	}
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", prefix, err)
}
