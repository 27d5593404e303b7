package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Duration is a [time.Duration] written in YAML as a Go duration string
// ("720h", "30s", "1h30m"). A bare number such as 30 is an error, because
// its unit (seconds? milliseconds?) would be a guess; "0" is accepted since
// zero needs no unit.
type Duration time.Duration

// D returns d as a [time.Duration].
func (d Duration) D() time.Duration { return time.Duration(d) }

// String formats d without zero trailing units: "720h", "10m", "1h30m".
func (d Duration) String() string {
	s := time.Duration(d).String()
	// time.Duration.String always spells out minutes and seconds
	// ("720h0m0s"); drop zero units at the end so the shipped file and
	// messages read the way people write durations.
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// MarshalYAML writes d as its String.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// UnmarshalYAML reads a duration string. Errors are *yaml.TypeError, so the
// decoder carries on and reports every bad value with its line.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return nodeError(n, "want a duration like 30s, 10m or 720h, got %s", describeNode(n))
	}
	v, err := parseDuration(n.Value)
	if err != nil {
		return nodeError(n, "%v", err)
	}
	*d = Duration(v)
	return nil
}

// parseDuration is time.ParseDuration with messages that say how to fix the
// two mistakes people make: a bare number, and a day unit.
func parseDuration(s string) (time.Duration, error) {
	if s == "0" {
		return 0, nil
	}
	if s != "" && strings.Trim(s, "0123456789.+-") == "" {
		return 0, fmt.Errorf("invalid duration %q: a bare number has no unit; write it with one, like %ss, %sm or %sh", s, s, s, s)
	}
	if days, ok := strings.CutSuffix(s, "d"); ok {
		if n, err := strconv.Atoi(days); err == nil && n > 0 {
			return 0, fmt.Errorf("invalid duration %q: there is no day unit; write %dh for %d days", s, 24*n, n)
		}
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("invalid duration %q: want a number with a unit, like 30s, 10m or 720h", s)
	}
	return v, nil
}

// Rate is an event rate such as "5/m": at most N events per Per. It is
// written "N/s", "N/m" or "N/h" with N a positive integer; "0" or "off"
// disables the limit, which is the zero Rate.
type Rate struct {
	// N is how many events are allowed per Per. Zero disables the limit.
	N int
	// Per is the window N applies to: a second, minute or hour when read
	// from YAML. Ignored when N is zero.
	Per time.Duration
}

// Disabled reports whether r imposes no limit.
func (r Rate) Disabled() bool { return r.N == 0 }

var rateUnits = map[string]time.Duration{"s": time.Second, "m": time.Minute, "h": time.Hour}

// String formats r the way it is written in YAML: "5/m", or "off".
func (r Rate) String() string {
	if r.Disabled() {
		return "off"
	}
	for unit, per := range rateUnits {
		if r.Per == per {
			return strconv.Itoa(r.N) + "/" + unit
		}
	}
	// Only reachable for a Rate built in code with an unusual window.
	return strconv.Itoa(r.N) + "/" + Duration(r.Per).String()
}

// MarshalYAML writes r as its String.
func (r Rate) MarshalYAML() (any, error) { return r.String(), nil }

// UnmarshalYAML reads "N/s", "N/m", "N/h", "0" or "off". Errors are
// *yaml.TypeError, so the decoder reports every bad value with its line.
func (r *Rate) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return nodeError(n, "want a rate like 5/m, or off, got %s", describeNode(n))
	}
	v, err := parseRate(n.Value)
	if err != nil {
		return nodeError(n, "%v", err)
	}
	*r = v
	return nil
}

func parseRate(s string) (Rate, error) {
	if s == "0" || s == "off" {
		return Rate{}, nil
	}
	count, unit, ok := strings.Cut(s, "/")
	per, known := rateUnits[unit]
	if !ok || !known || count == "" || strings.TrimLeft(count, "0123456789") != "" {
		return Rate{}, fmt.Errorf("invalid rate %q: want N/s, N/m or N/h (e.g. 5/m), or off", s)
	}
	n, err := strconv.Atoi(count)
	if err != nil {
		return Rate{}, fmt.Errorf("invalid rate %q: %s is too large", s, count)
	}
	if n == 0 {
		return Rate{}, fmt.Errorf("invalid rate %q: N must be positive; write off to disable the limit", s)
	}
	return Rate{N: n, Per: per}, nil
}

// nodeError reports a bad value as a *yaml.TypeError, which yaml.v3 collects
// (with the others) instead of aborting the decode; the "line N:" prefix is
// the form yaml.v3 uses, which Parse rewrites as "file:N: path:".
func nodeError(n *yaml.Node, format string, args ...any) error {
	return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: ", n.Line) + fmt.Sprintf(format, args...)}}
}

// describeNode names what a node holds, for "want X, got Y" messages.
func describeNode(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	}
	v := n.Value
	if len(v) > 40 {
		v = v[:37] + "..."
	}
	if n.ShortTag() == "!!str" {
		return strconv.Quote(v)
	}
	return v
}
