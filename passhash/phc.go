package passhash

import (
	"fmt"
	"strings"
)

// phcParams reads a PHC string's "k=v,k=v" parameters, which must be
// exactly names, in that order (as the encoders write them). Values are
// decimals no larger than limits[i]: ErrTooCostly beyond.
func phcParams(s string, names []string, limits []int, format Format) ([]int, error) {
	parts := strings.Split(s, ",")
	if len(parts) != len(names) {
		return nil, fmt.Errorf("%w: %s parameters are %s", ErrMalformed, format, strings.Join(names, ","))
	}
	vals := make([]int, len(names))
	for i, p := range parts {
		k, v, ok := strings.Cut(p, "=")
		if !ok || k != names[i] {
			return nil, fmt.Errorf("%w: %s parameters are %s", ErrMalformed, format, strings.Join(names, ","))
		}
		n, err := atoi(v, string(format)+" "+k, limits[i])
		if err != nil {
			return nil, err
		}
		vals[i] = n
	}
	return vals, nil
}
