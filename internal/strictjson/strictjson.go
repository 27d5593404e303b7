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
	"io"
)

// ErrInvalid is returned for input that is not one valid JSON value.
var ErrInvalid = errors.New("invalid JSON")

// CheckDuplicates returns an error if data is not exactly one valid JSON
// value or if any object in it repeats a member name.
func CheckDuplicates(data []byte) error {
	if !json.Valid(data) {
		return ErrInvalid
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := walk(dec); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return ErrInvalid
	}
	return nil
}

func walk(dec *json.Decoder) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch tok {
	case json.Delim('{'):
		seen := map[string]bool{}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return err
			}
			key := k.(string)
			if seen[key] {
				return fmt.Errorf("duplicate member %q", key)
			}
			seen[key] = true
			if err := walk(dec); err != nil {
				return err
			}
		}
		_, err = dec.Token()
		return err
	case json.Delim('['):
		for dec.More() {
			if err := walk(dec); err != nil {
				return err
			}
		}
		_, err = dec.Token()
		return err
	}
	return nil
}
