package config

import (
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// This file turns yaml.v3's errors into problems that name the file's line
// and YAML path and say what was wanted in the file's terms, not Go's.

var (
	yamlLineRE     = regexp.MustCompile(`(?s)^line (\d+): (.*)$`)
	unknownFieldRE = regexp.MustCompile(`^field (.+) not found in type \S+$`)
	duplicateKeyRE = regexp.MustCompile(`^mapping key (".*") already defined at line (\d+)$`)
	cannotRE       = regexp.MustCompile("(?s)^cannot unmarshal (\\S+)(?: `(.*)`)? into (.+)$")
)

// syntaxProblem turns an error from yaml.v3's parser ("yaml: line 3: ...")
// into a problem.
func syntaxProblem(err error) problem {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	m := yamlLineRE.FindStringSubmatch(msg)
	if m == nil {
		return problem{msg: msg}
	}
	line, _ := strconv.Atoi(m[1])
	if zeroBasedLine(m[2]) {
		line++
	}
	return problem{line: line, msg: m[2]}
}

// fromParserFail reports whether a message came from yaml.v3's parser.fail,
// which numbers lines, rather than from one of the few checks made while
// building nodes, which do not.
func fromParserFail(msg string) bool {
	for _, prefix := range []string{"unknown anchor ", "attempted to go past the end of stream", "cannot decode "} {
		if strings.HasPrefix(msg, prefix) {
			return false
		}
	}
	return true
}

// zeroBasedLine reports whether yaml.v3 numbered the line of problem from 0.
// It does so for parser errors: its parser.fail adds 1 to the (0-based) mark
// only for scanner errors. The parser's problems are this closed set (from
// parserc.go, plus decode.go's "expected ... event"), none of which the
// scanner uses.
func zeroBasedLine(problem string) bool {
	switch problem {
	case "did not find expected key",
		"did not find expected node content",
		"did not find expected '-' indicator",
		"did not find expected ',' or ']'",
		"did not find expected ',' or '}'",
		"did not find expected <document start>",
		"did not find expected <stream-start>",
		"found duplicate %TAG directive",
		"found duplicate %YAML directive",
		"found incompatible YAML document",
		"found undefined tag handle":
		return true
	}
	return strings.HasPrefix(problem, "expected ") && strings.Contains(problem, " event but got ")
}

// decodeProblem rewrites one of yaml.v3's decode errors ("line 12: cannot
// unmarshal !!str `abc` into int") as a problem naming the YAML path and
// saying what was wanted, in the words of this file rather than Go types.
func (ix *positions) decodeProblem(s string) problem {
	m := yamlLineRE.FindStringSubmatch(s)
	if m == nil {
		return problem{msg: s}
	}
	line, _ := strconv.Atoi(m[1])
	msg := m[2]
	if e, ok := ix.source(line, s); ok {
		if m := cannotRE.FindStringSubmatch(msg); m != nil {
			return problem{line: line, msg: e.path + ": want " + describeType(m[3]) + ", got " + describeNode(e.value)}
		}
		return problem{line: line, msg: e.path + ": " + msg}
	}
	if m := unknownFieldRE.FindStringSubmatch(msg); m != nil {
		path := m[1]
		if e, ok := ix.keyAt(line, m[1]); ok {
			path = e.path
		}
		return problem{line: line, msg: path + ": unknown key" + suggest(path)}
	}
	if m := duplicateKeyRE.FindStringSubmatch(msg); m != nil {
		key, _ := strconv.Unquote(m[1])
		path := key
		if e, ok := ix.keyAt(line, key); ok {
			path = e.path
		}
		return problem{line: line, msg: path + ": duplicate key (first set at line " + m[2] + ")"}
	}
	if m := cannotRE.FindStringSubmatch(msg); m != nil {
		tag, value, typ := m[1], m[2], m[3]
		got := tag
		if value != "" {
			got = strconv.Quote(value)
		}
		switch tag {
		case "!!map":
			got = "a mapping"
		case "!!seq":
			got = "a list"
		}
		e, ok := ix.valueAt(line, strings.TrimSuffix(value, "..."))
		if !ok {
			return problem{line: line, msg: "want " + describeType(typ) + ", got " + got}
		}
		return problem{line: line, msg: e.path + ": want " + describeType(typ) + ", got " + describeNode(e.value)}
	}
	if e, ok := ix.valueAt(line, ""); ok {
		return problem{line: line, msg: e.path + ": " + msg}
	}
	return problem{line: line, msg: msg}
}

// source finds the entry whose value causes the decode error s on line:
// the one that, decoded alone into its field's type, fails with s. yaml.v3
// gives a line and no column, and in flow style ({a: 1, b: 2}) several
// values share a line. Of entries failing alike (a mapping fails with its
// bad child's error) the deepest wins; an entry already blamed for an
// error is passed over, so the same mistake made twice on a line is
// reported at each key.
func (ix *positions) source(line int, s string) (entry, bool) {
	best := -1
	for i, e := range ix.entries {
		if e.value.Line != line || ix.blamed[i] {
			continue
		}
		t, ok := fieldType(e.path)
		if !ok {
			continue
		}
		err := e.value.Decode(reflect.New(t).Interface())
		te, isType := err.(*yaml.TypeError)
		if !isType || !slices.Contains(te.Errors, s) {
			continue
		}
		if best < 0 || e.depth() > ix.entries[best].depth() {
			best = i
		}
	}
	if best < 0 {
		return entry{}, false
	}
	if ix.blamed == nil {
		ix.blamed = map[int]bool{}
	}
	ix.blamed[best] = true
	return ix.entries[best], true
}

// fieldType returns the Go type a YAML path decodes into.
func fieldType(path string) (reflect.Type, bool) {
	t := reflect.TypeFor[Config]()
	for _, seg := range strings.Split(path, ".") {
		name, rest, _ := strings.Cut(seg, "[")
		if t.Kind() != reflect.Struct || isLeaf(t) {
			return nil, false
		}
		f, ok := yamlFields(t)[name]
		if !ok {
			return nil, false
		}
		t = t.Field(f).Type
		for range strings.Count(rest, "]") {
			if t.Kind() != reflect.Slice {
				return nil, false
			}
			t = t.Elem()
		}
	}
	return t, true
}

// keyAt finds the key named key on line.
func (ix *positions) keyAt(line int, key string) (entry, bool) {
	for _, e := range ix.entries {
		if e.key != nil && e.key.Line == line && e.key.Value == key {
			return e, true
		}
	}
	return entry{}, false
}

// valueAt finds the most deeply nested value on line, preferring one whose
// text starts with prefix (yaml.v3 quotes a truncated value in its errors).
// Several values share a line only in flow style ({a: 1, b: 2}).
func (ix *positions) valueAt(line int, prefix string) (entry, bool) {
	var best entry
	found, bestMatches := false, false
	for _, e := range ix.entries {
		if e.value.Line != line {
			continue
		}
		matches := prefix != "" && e.value.Kind == yaml.ScalarNode && strings.HasPrefix(e.value.Value, prefix)
		if !found || matches && !bestMatches || matches == bestMatches && e.depth() > best.depth() {
			best, found, bestMatches = e, true, matches
		}
	}
	return best, found
}

// describeType names a Go type from a yaml.v3 message the way the file's
// author thinks of it.
func describeType(typ string) string {
	switch typ {
	case "string":
		return "a string"
	case "int", "int64":
		return "a whole number"
	case "bool":
		return "true or false"
	case "[]string":
		return "a list of strings"
	}
	switch {
	case strings.HasPrefix(typ, "[]"):
		return "a list"
	case strings.HasPrefix(typ, "config."):
		return "a mapping"
	}
	return typ
}

// suggest returns " (did you mean x?)" when path's last key is a near miss
// of a key valid at that place, else "".
func suggest(path string) string {
	parent, key := "", path
	if i := strings.LastIndex(path, "."); i >= 0 {
		parent, key = path[:i], path[i+1:]
	}
	t, ok := typeAt(parent)
	if !ok {
		return ""
	}
	best, bestDist := "", 3 // suggest only within two edits
	for name := range yamlFields(t) {
		if d := editDistance(key, name); d < bestDist || d == bestDist && name < best {
			best, bestDist = name, d
		}
	}
	if best == "" {
		return ""
	}
	return " (did you mean " + best + "?)"
}

// typeAt returns the struct type holding the keys at path ("" is Config).
func typeAt(path string) (reflect.Type, bool) {
	t := reflect.TypeFor[Config]()
	if path != "" {
		for _, seg := range strings.Split(path, ".") {
			name, _, _ := strings.Cut(seg, "[")
			f, ok := yamlFields(t)[name]
			if !ok {
				return nil, false
			}
			t = t.Field(f).Type
			for range strings.Count(seg, "[") {
				if t.Kind() != reflect.Slice {
					return nil, false
				}
				t = t.Elem()
			}
			if t.Kind() != reflect.Struct || isLeaf(t) {
				return nil, false
			}
		}
	}
	return t, true
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}
