package config

import (
	"reflect"
	"strings"
)

// Reloadable lists the YAML paths a running sidecar applies when it
// re-reads its file (SIGHUP); a path covers every key under it. Any other
// key is read once, at start-up: the listeners, the database, the secret,
// the JWT issuer and lifetimes, the token cache and the upstream shape
// long-lived state (sockets, connection pools, issued cookies and tokens)
// that a reload cannot rebuild without breaking requests in flight.
var Reloadable = []string{
	"auth.trusted_origins",
	"cors",
	"routes",
	"limits",
	"proxy.strip_headers",
	"proxy.allowed_hosts",
	"proxy.trusted_proxies",
	"proxy.forward_authorization",
	"log.level",
	"log.access",
	"keys.max_age",
	"keys.cooldown",
	"keys.stale_if_error",
}

// RestartKeys returns the YAML paths ("listen", "database.path") of the
// keys whose values differ between old and next and that only a restart
// applies, in the order of the Config type. Empty: a running sidecar can
// switch from old to next.
func RestartKeys(old, next Config) []string {
	var out []string
	diffKeys(reflect.ValueOf(old), reflect.ValueOf(next), "", &out)
	return out
}

// diffKeys compares a and b field by field, by their YAML names. A struct
// with its own UnmarshalYAML (Duration, Rate) is one value, as in the file.
func diffKeys(a, b reflect.Value, path string, out *[]string) {
	if isReloadable(path) {
		return
	}
	t := a.Type()
	if t.Kind() != reflect.Struct || reflect.PointerTo(t).Implements(unmarshalerType) {
		// "[]" in the file and the default nil are the same empty list.
		empty := t.Kind() == reflect.Slice && a.Len() == 0 && b.Len() == 0
		if !empty && !reflect.DeepEqual(a.Interface(), b.Interface()) {
			*out = append(*out, path)
		}
		return
	}
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		if name == "" || name == "-" {
			// Every Config field has a YAML name (TestRestartKeysCoverEveryKey);
			// one without would be invisible to the file anyway.
			continue
		}
		sub := name
		if path != "" {
			sub = path + "." + name
		}
		diffKeys(a.Field(i), b.Field(i), sub, out)
	}
}

func isReloadable(path string) bool {
	for _, p := range Reloadable {
		if path == p || strings.HasPrefix(path, p+".") {
			return true
		}
	}
	return false
}
