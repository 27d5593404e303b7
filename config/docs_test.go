package config

import (
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// docsPage is the configuration reference. TestConfigurationPage keeps it,
// sidecar.yaml (TestShippedFileIsDefault, TestShippedFileDocumentsEveryKey)
// and the code's defaults one truth: Default() is the pivot.
const docsPage = "../docs/configuration.md"

// A key row of the page: | `path` | `default` | reload | meaning |
var docsRowRE = regexp.MustCompile("^\\| `([a-z0-9_.]+)` \\| (.*?) \\| ([a-z ]+?) \\| (.+) \\|$")

// docsReload is what the page's reload column says for path.
func docsReload(path string) string {
	switch {
	case isReloadable(path, Reloadable):
		return "yes"
	case isReloadable(path, VerifierReloadable):
		return "verifier"
	default:
		return "restart"
	}
}

// orderedSettings lists every setting's path in the order of the Config
// type, with its default value.
func orderedSettings(v reflect.Value, prefix string) (paths []string, values []reflect.Value) {
	t := v.Type()
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		if name == "" || name == "-" {
			continue
		}
		path := name
		if prefix != "" {
			path = prefix + "." + name
		}
		if ft := t.Field(i).Type; ft.Kind() == reflect.Struct && !isLeaf(ft) {
			p, vs := orderedSettings(v.Field(i), path)
			paths, values = append(paths, p...), append(values, vs...)
			continue
		}
		paths, values = append(paths, path), append(values, v.Field(i))
	}
	return paths, values
}

// yamlText is v as the page writes a default: flow-style YAML on one line.
func yamlText(v reflect.Value) (string, error) {
	var n yaml.Node
	if err := n.Encode(v.Interface()); err != nil {
		return "", err
	}
	setFlow(&n)
	out, err := yaml.Marshal(&n)
	return strings.TrimSpace(string(out)), err
}

func setFlow(n *yaml.Node) {
	n.Style |= yaml.FlowStyle
	for _, c := range n.Content {
		setFlow(c)
	}
}

// TestConfigurationPage: docs/configuration.md has one row per key of the
// config, in the order of the Config type, with the default of Default()
// and the reload behaviour of Reloadable and VerifierReloadable, and no row
// for a key the config does not have.
func TestConfigurationPage(t *testing.T) {
	raw, err := os.ReadFile(docsPage)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		line                 int
		def, reload, meaning string
	}
	rows := map[string]row{}
	var order []string
	for i, line := range strings.Split(string(raw), "\n") {
		m := docsRowRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		if prev, dup := rows[m[1]]; dup {
			t.Errorf("%s:%d: a second row for `%s` (the first is at line %d): every key once", docsPage, i+1, m[1], prev.line)
		}
		rows[m[1]] = row{i + 1, m[2], m[3], m[4]}
		order = append(order, m[1])
	}
	paths, values := orderedSettings(reflect.ValueOf(Default()), "")
	known := map[string]bool{}
	var present []string
	for i, path := range paths {
		known[path] = true
		want, err := yamlText(values[i])
		if err != nil {
			t.Fatal(err)
		}
		r, ok := rows[path]
		if !ok {
			t.Errorf("%s: no row for `%s`, a key of config.Config: add\n| `%s` | `%s` | %s | what it does |",
				docsPage, path, path, want, docsReload(path))
			continue
		}
		present = append(present, path)
		// The cell is YAML in backticks; decoded into the key's type it
		// must be the default (so `[]` and `""` read as an empty value).
		cell := strings.TrimSuffix(strings.TrimPrefix(r.def, "`"), "`")
		got := reflect.New(values[i].Type())
		if err := yaml.Unmarshal([]byte(cell), got.Interface()); err != nil {
			t.Errorf("%s:%d: `%s`'s default %s does not parse as its type: %v; want `%s`", docsPage, r.line, path, r.def, err, want)
		} else if gotText, _ := yamlText(got.Elem()); gotText != want {
			t.Errorf("%s:%d: `%s`'s default is %s, config.Default() says `%s`", docsPage, r.line, path, r.def, want)
		}
		if wantReload := docsReload(path); r.reload != wantReload {
			t.Errorf("%s:%d: `%s` says reload %q, want %q (config.Reloadable, config.VerifierReloadable)", docsPage, r.line, path, r.reload, wantReload)
		}
	}
	for _, path := range order {
		if !known[path] {
			t.Errorf("%s:%d: a row for `%s`, which is not a key of config.Config: remove it, or add the key", docsPage, rows[path].line, path)
		}
	}
	var inPage []string
	for _, p := range order {
		if known[p] {
			inPage = append(inPage, p)
		}
	}
	if !slices.Equal(inPage, present) {
		t.Errorf("%s: the rows are not in the order of config.Config (and sidecar.yaml); want\n%s", docsPage, strings.Join(present, "\n"))
	}
}
