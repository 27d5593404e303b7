package config

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// entry is one key (or list item) of the file: its dotted YAML path, and the
// nodes of its key (nil for a list item) and its value.
type entry struct {
	path  string
	key   *yaml.Node
	value *yaml.Node
}

// line is where a problem with the entry is reported: the key's line, or
// the item's for a list item.
func (e entry) line() int {
	if e.key != nil {
		return e.key.Line
	}
	return e.value.Line
}

func (e entry) depth() int { return strings.Count(e.path, ".") + strings.Count(e.path, "[") }

// positions indexes a parsed file by YAML path, so that problems found on
// the decoded Config can be reported at the line that caused them.
type positions struct {
	entries []entry
	line    map[string]int // path -> line of its first occurrence
	blamed  map[int]bool   // entries a decode error was reported at (source)
}

// index walks doc alongside the Config type, recording every key and list
// item, and returns problems yaml.v3 lets through silently: an empty value
// for a scalar key (which would keep the default) and a fractional number
// for an integer key (which yaml.v3 truncates).
func index(doc *yaml.Node) (*positions, []problem) {
	ix := &positions{line: map[string]int{}}
	var probs []problem
	if doc != nil && doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
		def := Default()
		ix.walk(doc.Content[0], reflect.ValueOf(&def).Elem(), "", true, &probs)
	}
	return ix, probs
}

var unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()

// isLeaf reports whether values of t are written as a YAML scalar.
func isLeaf(t reflect.Type) bool {
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		return true
	}
	return t.Kind() != reflect.Struct && t.Kind() != reflect.Slice
}

// walk records n's children. def is the default value at path, quoted in the
// message for an empty value; inside lists there are no defaults (hasDefault
// is false, def is the zero value), and Validate reports empty fields there.
func (ix *positions) walk(n *yaml.Node, def reflect.Value, path string, hasDefault bool, probs *[]problem) {
	t := def.Type()
	switch {
	case n.Kind == yaml.MappingNode && !isLeaf(t) && t.Kind() == reflect.Struct:
		fields := yamlFields(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			p := k.Value
			if path != "" {
				p = path + "." + k.Value
			}
			ix.add(entry{path: p, key: k, value: v})
			f, known := fields[k.Value]
			if !known {
				continue // yaml.v3 reports unknown keys (KnownFields)
			}
			fv := def.Field(f)
			if isLeaf(fv.Type()) {
				if pr, bad := checkScalar(v, fv, p, hasDefault); bad {
					*probs = append(*probs, pr)
				}
				continue
			}
			ix.walk(v, fv, p, hasDefault, probs)
		}
	case n.Kind == yaml.SequenceNode && t.Kind() == reflect.Slice:
		zero := reflect.New(t.Elem()).Elem()
		for i, item := range n.Content {
			p := path + "[" + strconv.Itoa(i) + "]"
			ix.add(entry{path: p, value: item})
			if !isLeaf(zero.Type()) {
				ix.walk(item, zero, p, false, probs)
			}
		}
	}
}

func (ix *positions) add(e entry) {
	ix.entries = append(ix.entries, e)
	if _, dup := ix.line[e.path]; !dup {
		ix.line[e.path] = e.line()
	}
}

// checkScalar catches the scalar values yaml.v3 accepts but should not.
func checkScalar(v *yaml.Node, def reflect.Value, path string, hasDefault bool) (problem, bool) {
	switch {
	case v.Kind == yaml.ScalarNode && v.ShortTag() == "!!null" && hasDefault:
		shown := def.Interface()
		if s, ok := shown.(string); ok {
			shown = strconv.Quote(s)
		}
		return problem{line: v.Line, msg: fmt.Sprintf("%s: empty value: set one, or delete the key to keep the default (%v)", path, shown)}, true
	case v.Kind == yaml.ScalarNode && v.ShortTag() == "!!float" && def.CanInt() &&
		!reflect.PointerTo(def.Type()).Implements(unmarshalerType):
		return problem{line: v.Line, msg: path + ": want a whole number, got " + v.Value}, true
	}
	return problem{}, false
}

// yamlFields maps the yaml names of t's fields to their indexes.
func yamlFields(t reflect.Type) map[string]int {
	m := make(map[string]int, t.NumField())
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		if name != "" && name != "-" {
			m[name] = i
		}
	}
	return m
}

// lineOf returns the line of path, else of alt, else of the nearest
// enclosing key of either; 0 if none is in the file (a default was wrong).
// has reports whether the file sets path.
func (ix *positions) has(path string) bool {
	_, ok := ix.line[path]
	return ok
}

func (ix *positions) lineOf(path, alt string) int {
	for _, p := range []string{path, alt} {
		if l := ix.line[p]; p != "" && l > 0 {
			return l
		}
	}
	for _, p := range []string{path, alt} {
		for p != "" {
			p = parentPath(p)
			if l := ix.line[p]; p != "" && l > 0 {
				return l
			}
		}
	}
	return 0
}

// parentPath strips the last ".key" or "[i]" from p.
func parentPath(p string) string {
	i := strings.LastIndexAny(p, ".[")
	if i < 0 {
		return ""
	}
	return p[:i]
}
