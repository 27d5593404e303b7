package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"
)

// problem is one error found in a file, before it is formatted as
// "file:line: msg".
type problem struct {
	line int    // 0 when unknown
	msg  string // starts with the YAML path when one is known
}

// Load reads the file at path and returns [Parse]'s result for it.
func Load(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	return Parse(path, data)
}

// Parse decodes data strictly over [Default] and validates the result. An
// empty file yields the defaults. Every problem is reported, joined with
// errors.Join, one per line of the error's text, each as
// "name:line: yaml.path: message" (without ":line" when no line applies),
// ordered by line. On error the returned Config is the zero value.
func Parse(name string, data []byte) (Config, error) {
	doc, probs := parseDocument(data)
	if len(probs) > 0 {
		return Config{}, format(name, probs)
	}
	ix, probs := index(doc)
	cfg := Default()
	if doc != nil {
		// Decoded from the bytes rather than from doc, because only a
		// Decoder offers KnownFields (unknown keys are errors).
		dec := yaml.NewDecoder(bytes.NewReader(data))
		dec.KnownFields(true)
		if err := dec.Decode(&cfg); err != nil {
			te, ok := err.(*yaml.TypeError)
			if !ok {
				return Config{}, format(name, append(probs, syntaxProblem(err)))
			}
			for _, s := range te.Errors {
				probs = append(probs, ix.decodeProblem(s))
			}
		}
	}
	cfg.modeDefaults(ix.has)
	if err := errors.Join(cfg.Validate(), driverKeys(cfg, ix.has), writtenAdminRoutes(cfg, ix.has)); err != nil {
		errs := []error{err}
		if joined, ok := err.(interface{ Unwrap() []error }); ok {
			errs = joined.Unwrap()
		}
		errs = flatten(errs)
		for _, e := range errs {
			p := problem{msg: e.Error()}
			if fe, ok := e.(*fieldError); ok {
				p.line = ix.lineOf(fe.path, fe.alt)
			}
			probs = append(probs, p)
		}
	}
	if len(probs) > 0 {
		return Config{}, format(name, probs)
	}
	return cfg, nil
}

// parseDocument parses data into a node tree, refusing a second document:
// yaml.v3 would silently ignore it, and with it whatever the author meant.
// It returns a nil node for a file without a document (empty or comments).
func parseDocument(data []byte) (*yaml.Node, []problem) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		p := syntaxProblem(err)
		if p.line == 0 && fromParserFail(p.msg) {
			// yaml.v3 omits "line N:" when the 0-based mark is 0, so an
			// error from its parser without a line is on the first line.
			p.line = 1
		}
		return nil, []problem{p}
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case errors.Is(err, io.EOF):
		return &doc, nil
	case err != nil:
		return nil, []problem{syntaxProblem(err)}
	}
	return nil, []problem{{line: next.Line, msg: "a second YAML document starts here; the config file must hold exactly one"}}
}

var oneLine = strings.NewReplacer("\r", `\r`, "\n", `\n`)

// format orders problems by line (those without a line last), drops exact
// repeats, and joins them into one error.
func format(name string, probs []problem) error {
	sort.SliceStable(probs, func(i, j int) bool {
		li, lj := probs[i].line, probs[j].line
		return li != 0 && (lj == 0 || li < lj)
	})
	errs := make([]error, 0, len(probs))
	seen := make(map[problem]bool, len(probs))
	for _, p := range probs {
		if seen[p] {
			continue
		}
		seen[p] = true
		// One problem, one line: a multi-line value quoted by yaml.v3
		// must not split a message.
		p.msg = oneLine.Replace(p.msg)
		if p.line > 0 {
			errs = append(errs, fmt.Errorf("%s:%d: %s", name, p.line, p.msg))
		} else {
			errs = append(errs, fmt.Errorf("%s: %s", name, p.msg))
		}
	}
	return errors.Join(errs...)
}

// flatten unwraps nested errors.Join results into one list.
func flatten(errs []error) []error {
	var out []error
	for _, e := range errs {
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			out = append(out, flatten(j.Unwrap())...)
			continue
		}
		out = append(out, e)
	}
	return out
}

// modeDefaults applies the defaults that depend on mode, to keys the file
// does not set: a verifier has no database and so no cookie-only routes
// unless it is given them (with a database to serve them). Its admin
// routes stay: a verifier never forwards a route whose role it cannot
// check, so without a database they are answered 403 (routes.admin: []
// forwards them).
func (c *Config) modeDefaults(has func(path string) bool) {
	if !c.Verifier() {
		return
	}
	if !has("database.driver") {
		c.Database.Driver = DriverNone
	}
	if !has("routes.cookie_only") {
		c.Routes.CookieOnly = []string{}
	}
}

// writtenAdminRoutes refuses admin routes written out for a verifier
// without a database: it could only answer them 403, which whoever wrote
// them did not mean. The defaults, not written, are answered 403 quietly.
// Only a file can say what it set, so this is checked here and not in
// Validate.
func writtenAdminRoutes(c Config, has func(path string) bool) error {
	if !c.Verifier() || c.Database.Driver != DriverNone || !has("routes.admin") || len(c.Routes.Admin) == 0 {
		return nil
	}
	var p problems
	p.addRelated("routes.admin", "database.driver", `needs a database to read user_role, and database.driver is "none": remove the routes, write routes.admin: [] if the upstream checks roles itself, or use the issuers' postgres database`)
	return errors.Join(p...)
}

// driverKeys refuses settings of one database driver written for another:
// they would be silently ignored, and whoever wrote them meant something.
// A key left at its default is no such sign (the shipped file lists every
// key), so only a changed value is refused. Only a file can say what it
// set, so this is checked here and not in Validate.
func driverKeys(c Config, has func(path string) bool) error {
	def := Default().Database
	var p problems
	for _, k := range []struct {
		path    string
		driver  Driver
		changed bool
	}{
		{"database.path", DriverSQLite, c.Database.Path != def.Path},
		{"database.url_env", DriverPostgres, c.Database.URLEnv != def.URLEnv},
		{"database.max_conns", DriverPostgres, c.Database.MaxConns != def.MaxConns},
	} {
		if k.changed && has(k.path) && c.Database.Driver != k.driver {
			p.addRelated(k.path, "database.driver", "is only for database.driver %q, and the driver is %q", k.driver, c.Database.Driver)
		}
	}
	return errors.Join(p...)
}
