package issuer

import "strings"

const maxEmailBytes = 254 // RFC 5321 path limit

// validEmail mirrors zod's z.email() pattern, which Better Auth uses:
// ^(?!\.)(?!.*\.\.)([A-Za-z0-9_'+\-\.]*)[A-Za-z0-9_+-]@([A-Za-z0-9][A-Za-z0-9\-]*\.)+[A-Za-z]{2,}$
// written out by hand because Go's regexp has no lookahead.
func validEmail(s string) bool {
	if len(s) > maxEmailBytes || strings.Contains(s, "..") {
		return false
	}
	local, domain, ok := strings.Cut(s, "@")
	if !ok || local == "" || local[0] == '.' {
		return false
	}
	for i := 0; i < len(local); i++ {
		c := local[i]
		if !(isAlnum(c) || strings.IndexByte("_'+-.", c) >= 0) {
			return false
		}
	}
	if last := local[len(local)-1]; last == '.' || last == '\'' {
		return false
	}
	labels := strings.Split(domain, ".")
	if len(labels) < 2 {
		return false
	}
	for _, l := range labels[:len(labels)-1] {
		if l == "" || !isAlnum(l[0]) {
			return false
		}
		for i := 1; i < len(l); i++ {
			if !isAlnum(l[i]) && l[i] != '-' {
				return false
			}
		}
	}
	tld := labels[len(labels)-1]
	if len(tld) < 2 {
		return false
	}
	for i := 0; i < len(tld); i++ {
		if !('a' <= tld[i] && tld[i] <= 'z' || 'A' <= tld[i] && tld[i] <= 'Z') {
			return false
		}
	}
	return true
}

func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}
