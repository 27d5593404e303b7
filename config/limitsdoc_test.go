package config

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// TestLimitsDoc keeps the key table of docs/limits.md true: one row for
// every limits.* key and for the other keys the page is about, each with
// Default()'s value and the reload behaviour RestartKeys gives it, and no
// row for anything else.
func TestLimitsDoc(t *testing.T) {
	doc := string(readFile(t, "../docs/limits.md"))
	_, table, ok := strings.Cut(doc, "## The keys, in short\n")
	if !ok {
		t.Fatal(`docs/limits.md has no "## The keys, in short" section`)
	}
	rows := map[string][]string{}
	for _, line := range strings.Split(table, "\n") {
		cells := strings.Split(strings.Trim(line, "| "), " | ")
		if len(cells) != 3 || !strings.HasPrefix(cells[0], "`") {
			continue
		}
		rows[strings.Trim(cells[0], "`")] = cells[1:]
	}
	others := []string{"auth.sign_in_after_verification", "metrics.reload_token_env", "proxy.trusted_proxies", "proxy.strip_headers",
		"proxy.upstream_client_share", "proxy.body_min_rate", "proxy.body_rate_grace", "proxy.body_buffer"}
	def := Default()
	var want []string
	walkLeaves(reflect.TypeFor[Config](), "", func(path string, index []int) {
		if !strings.HasPrefix(path, "limits.") && !slices.Contains(others, path) {
			return
		}
		want = append(want, path)
		t.Run(path, func(t *testing.T) {
			row, ok := rows[path]
			if !ok {
				t.Fatalf("no row for %s in docs/limits.md's key table", path)
			}
			b, err := yaml.Marshal(reflect.ValueOf(def).FieldByIndex(index).Interface())
			if err != nil {
				t.Fatal(err)
			}
			if got, want := row[0], "`"+strings.TrimSpace(string(b))+"`"; got != want {
				t.Errorf("default: the page says %s, Default() is %s", got, want)
			}
			next := Default()
			bump(reflect.ValueOf(&next).Elem().FieldByIndex(index))
			reload := "yes"
			if len(RestartKeys(def, next)) > 0 {
				reload = "restart"
			}
			if row[1] != reload {
				t.Errorf("reload: the page says %s, RestartKeys says %s", row[1], reload)
			}
		})
	})
	for path := range rows {
		if !slices.Contains(want, path) {
			t.Errorf("docs/limits.md's key table has a row for %s, which is neither under limits nor one of %v", path, others)
		}
	}
}
