package config

import (
	"reflect"
	"slices"
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
	"proxy.body_min_rate",
	"proxy.body_rate_grace",
	"proxy.body_buffer",
	"log.level",
	"log.access",
	"keys.max_age",
	"keys.cooldown",
	"keys.stale_if_error",
	"identity_providers",
	"sweep.interval",
	"migration",
}

// VerifierReloadable lists the paths a verifier (mode verifier before and
// after the reload) applies on top of Reloadable: the JWKS URL, and the CA
// file a new URL may need. The reload fetches the new URL before it
// switches, and is refused whole if that fetch brings no usable key. In
// full mode they stay restart keys: Validate refuses them there, as the
// keys come from the sidecar's own database.
var VerifierReloadable = []string{
	"keys.jwks_url",
	"keys.jwks_ca_file",
}

// RestartKeys returns the YAML paths ("listen", "database.path") of the
// keys whose values differ between old and next and that only a restart
// applies, in the order of the Config type. Empty: a running sidecar can
// switch from old to next.
func RestartKeys(old, next Config) []string {
	var out []string
	diffKeys(reflect.ValueOf(old), reflect.ValueOf(next), "", reloadable(old, next), &out)
	return out
}

// reloadable returns the paths a reload from old to next may change.
func reloadable(old, next Config) []string {
	if old.Verifier() && next.Verifier() {
		return append(slices.Clip(Reloadable), VerifierReloadable...)
	}
	return Reloadable
}

// diffKeys compares a and b field by field, by their YAML names. A struct
// with its own UnmarshalYAML (Duration, Rate) is one value, as in the file.
func diffKeys(a, b reflect.Value, path string, reloadable []string, out *[]string) {
	if isReloadable(path, reloadable) {
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
		diffKeys(a.Field(i), b.Field(i), sub, reloadable, out)
	}
}

// isReloadable reports whether path is one of reloadable or under one.
func isReloadable(path string, reloadable []string) bool {
	for _, p := range reloadable {
		if path == p || strings.HasPrefix(path, p+".") {
			return true
		}
	}
	return false
}
