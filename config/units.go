package config

import (
	"fmt"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// ByteRate is a transfer rate in bytes per second, written "N<unit>/s"
// with a unit of B, KiB or MiB ("1KiB/s", "512B/s"); "0" or "off" is the
// zero ByteRate, no rate.
type ByteRate int64

var byteUnits = []struct {
	name string
	n    int64
}{{"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}}

// maxByteRate bounds what the YAML form reads (1 TiB/s): beyond it the
// number is a typo, and it keeps the arithmetic far from overflow.
const maxByteRate = 1 << 40

// Off reports whether r is no rate.
func (r ByteRate) Off() bool { return r == 0 }

// String formats r as it is written in YAML, in the largest unit that
// divides it: "1KiB/s", "1536B/s", or "off".
func (r ByteRate) String() string {
	if r <= 0 {
		return "off"
	}
	for _, u := range byteUnits {
		if int64(r)%u.n == 0 {
			return strconv.FormatInt(int64(r)/u.n, 10) + u.name + "/s"
		}
	}
	return strconv.FormatInt(int64(r), 10) + "B/s"
}

// MarshalYAML writes r as its String.
func (r ByteRate) MarshalYAML() (any, error) { return r.String(), nil }

// UnmarshalYAML reads "N<unit>/s", "0" or "off". Errors are
// *yaml.TypeError, so the decoder reports every bad value with its line.
func (r *ByteRate) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return nodeError(n, "want a byte rate like 1KiB/s, or off, got %s", describeNode(n))
	}
	v, err := parseByteRate(n.Value)
	if err != nil {
		return nodeError(n, "%v", err)
	}
	*r = v
	return nil
}

func parseByteRate(s string) (ByteRate, error) {
	if s == "0" || s == "off" {
		return 0, nil
	}
	amount, ok := strings.CutSuffix(s, "/s")
	for _, u := range byteUnits {
		count, found := strings.CutSuffix(amount, u.name)
		if !ok || !found || count == "" || strings.TrimLeft(count, "0123456789") != "" {
			continue
		}
		c, err := strconv.ParseInt(count, 10, 64)
		if err != nil || c > maxByteRate/u.n {
			return 0, fmt.Errorf("invalid byte rate %q: at most 1048576MiB/s", s)
		}
		if c == 0 {
			return 0, fmt.Errorf("invalid byte rate %q: N must be positive; write off for no rate", s)
		}
		return ByteRate(c * u.n), nil
	}
	return 0, fmt.Errorf("invalid byte rate %q: want N/s with a unit of B, KiB or MiB (e.g. 1KiB/s), or off", s)
}

// Percent is a share written "N%" ("25%"), N a whole number.
type Percent int

// String formats p as it is written in YAML: "25%".
func (p Percent) String() string { return strconv.Itoa(int(p)) + "%" }

// MarshalYAML writes p as its String.
func (p Percent) MarshalYAML() (any, error) { return p.String(), nil }

// UnmarshalYAML reads "N%". Errors are *yaml.TypeError, so the decoder
// reports every bad value with its line.
func (p *Percent) UnmarshalYAML(n *yaml.Node) error {
	num, ok := strings.CutSuffix(n.Value, "%")
	if n.Kind != yaml.ScalarNode || !ok || num == "" || strings.TrimLeft(num, "0123456789") != "" || len(num) > 3 {
		return nodeError(n, "want a percentage like 25%%, got %s", describeNode(n))
	}
	v, _ := strconv.Atoi(num)
	*p = Percent(v)
	return nil
}
