package main

import (
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"gopkg.in/yaml.v3"
)

// rulesFile is the Prometheus rules shipped for operators.
const rulesFile = "../../deploy/prometheus/rules.yml"

// TestRuleSeriesAtStartup: every series deploy/prometheus/rules.yml reads
// is on a freshly started binary's /metrics, before any request, with the
// label values its matchers name. A series that appears only with its
// first event makes an expression match nothing (the alert can never
// fire) until then, and rate() misses that first event.
func TestRuleSeriesAtStartup(t *testing.T) {
	selectors := ruleSelectors(t, rulesFile)
	if len(selectors) < 10 {
		t.Fatalf("found only %d selectors in %s: is the parser broken?", len(selectors), rulesFile)
	}

	dir := t.TempDir()
	up := echoUpstream(t)
	// Mail on (to the log): the outbox's series exist only with a delivery;
	// an identity provider (down: its series must exist all the same) for
	// the sign-in series.
	cfg, port := writeConfigFile(t, dir, "rules.yaml", fmt.Sprintf("base_url: \"http://app.example.test\"\nupstream: %q\ndatabase: { driver: sqlite, path: %q }\nemail: { delivery: log }\n"+
		"identity_providers: [{id: corp, kind: oidc, issuer: \"http://127.0.0.1:1\", client_id: authsidecar}]\n", up.URL, filepath.Join(dir, "auth.db")))
	p := startBinary(t, cfg, port, "AUTH_SECRET="+e2eSecret)
	series := scrapeSeries(t, p.metrics+"/metrics")

	for _, sel := range selectors {
		t.Run(sel.String(), func(t *testing.T) {
			var have []map[string]string
			for _, s := range series {
				if s.name == sel.name {
					have = append(have, s.labels)
				}
			}
			if len(have) == 0 {
				t.Fatalf("%s is not exported at start-up", sel.name)
			}
			if !slices.ContainsFunc(have, sel.matches) {
				t.Fatalf("no %s series at start-up matches %s (have %s)", sel.name, sel, valuesOf(have, sel.matchers))
			}
			// A matcher written as a list of values (a|b|c) names values
			// the rule expects: each must exist, not just one of them.
			for _, m := range sel.matchers {
				if m.op != "=~" || !alternatives.MatchString(m.value) {
					continue
				}
				for _, v := range strings.Split(m.value, "|") {
					if !slices.ContainsFunc(have, func(l map[string]string) bool { return l[m.label] == v }) {
						t.Errorf("no %s{%s=%q} series at start-up", sel.name, m.label, v)
					}
				}
			}
		})
	}
}

// alternatives is a regexp that is only a list of literal values.
var alternatives = regexp.MustCompile(`^[A-Za-z0-9_]+(\|[A-Za-z0-9_]+)+$`)

type labelMatcher struct{ label, op, value string }

type selector struct {
	name     string
	matchers []labelMatcher
}

func (s selector) String() string {
	var ms []string
	for _, m := range s.matchers {
		ms = append(ms, fmt.Sprintf("%s%s%q", m.label, m.op, m.value))
	}
	return s.name + "{" + strings.Join(ms, ",") + "}"
}

func (s selector) matches(labels map[string]string) bool {
	for _, m := range s.matchers {
		v := labels[m.label]
		switch m.op {
		case "=":
			if v != m.value {
				return false
			}
		case "!=":
			if v == m.value {
				return false
			}
		case "=~", "!~":
			ok := regexp.MustCompile("^(?:" + m.value + ")$").MatchString(v)
			if ok != (m.op == "=~") {
				return false
			}
		}
	}
	return true
}

// promqlWords are the functions, aggregations, operators and modifiers the
// rules use; any other identifier is a series name. An unknown function
// fails the test (it would be taken for a series), so the list stays honest.
var promqlWords = []string{
	"sum", "min", "max", "avg", "count", "rate", "increase", "irate", "histogram_quantile", "absent",
	"and", "or", "unless", "by", "without", "on", "ignoring", "group_left", "group_right", "offset", "bool",
}

// labelsOf names the labels of the sidecar's labelled series, so a
// matcher on a recorded series can be traced to the series it came from.
var labelsOf = map[string][]string{
	"authsidecar_requests_total":                  {"class", "code"},
	"authsidecar_request_duration_seconds_bucket": {"class", "le"},
	"authsidecar_auth_failures_total":             {"class", "reason"},
	"authsidecar_upstream_errors_total":           {"kind"},
	"authsidecar_db_queries_total":                {"class"},
	"authsidecar_keyset_refreshes_total":          {"trigger", "result"},
	"authsidecar_signins_total":                   {"result"},
	"authsidecar_signups_total":                   {"result"},
	"authsidecar_websocket_closed_total":          {"reason"},
}

// scrapeMade are series the scrape itself makes, not the sidecar.
var scrapeMade = []string{"up"}

var (
	ident      = regexp.MustCompile(`^[A-Za-z_:][A-Za-z0-9_:]*`)
	matcherRe  = regexp.MustCompile(`^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*,?`)
	numberRe   = regexp.MustCompile(`^[0-9][0-9.eE+-]*`)
	durationRe = regexp.MustCompile(`^\[[0-9a-z:]*\]`)
)

// ruleSelectors reads the rules file and returns the series selectors of
// every expression, minus series recorded by the file's own rules and
// series the scrape makes.
//
// A selector with matchers on a recorded series (job_class:...{class="auth"})
// is rewritten onto the series its recording rule reads that carry the
// matched labels, so the label values it names are checked at their source.
func ruleSelectors(t *testing.T, path string) []selector {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Groups []struct {
			Rules []struct {
				Record string `yaml:"record"`
				Alert  string `yaml:"alert"`
				Expr   string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(raw, &file); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	recorded := map[string][]selector{} // record name -> the series it reads
	var exprs []string
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			if r.Record != "" {
				sels, err := parseSelectors(r.Expr)
				if err != nil {
					t.Fatalf("expression %q: %v", r.Expr, err)
				}
				recorded[r.Record] = sels
			}
			exprs = append(exprs, r.Expr)
		}
	}
	seen := map[string]bool{}
	var out []selector
	for _, e := range exprs {
		sels, err := parseSelectors(e)
		if err != nil {
			t.Fatalf("expression %q: %v", e, err)
		}
		for i := 0; i < len(sels); i++ {
			s := sels[i]
			if sources, ok := recorded[s.name]; ok {
				for _, m := range s.matchers {
					for _, src := range sources {
						if slices.Contains(labelsOf[src.name], m.label) {
							sels = append(sels, selector{name: src.name, matchers: append(slices.Clone(src.matchers), m)})
						}
					}
				}
				continue
			}
			if slices.Contains(scrapeMade, s.name) || seen[s.String()] {
				continue
			}
			if !strings.HasPrefix(s.name, "authsidecar_") {
				t.Fatalf("expression %q reads %q: neither the sidecar's, a recorded series nor a known PromQL word", e, s.name)
			}
			seen[s.String()] = true
			out = append(out, s)
		}
	}
	return out
}

// parseSelectors is a tokenizer for the PromQL the rules use: identifiers
// followed by "(" are functions, the words above are keywords, label
// lists after by/without/on/ignoring/group_* are skipped, and an
// identifier with an optional {matchers} is a series selector.
func parseSelectors(expr string) ([]selector, error) {
	var out []selector
	s := expr
	labelList := false // the next "(...)" lists labels
	for len(s) > 0 {
		switch c := s[0]; {
		case c == ' ' || c == '\n' || c == '\t' || strings.ContainsRune("+-*/<>=!,)^%", rune(c)):
			s = s[1:]
		case c == '(':
			if labelList {
				end := strings.IndexByte(s, ')')
				if end < 0 {
					return nil, fmt.Errorf("unclosed label list")
				}
				s = s[end+1:]
				labelList = false
				continue
			}
			s = s[1:]
		case c == '[':
			d := durationRe.FindString(s)
			if d == "" {
				return nil, fmt.Errorf("bad range at %q", s)
			}
			s = s[len(d):]
		case c == '"':
			end := strings.IndexByte(s[1:], '"')
			if end < 0 {
				return nil, fmt.Errorf("unclosed string")
			}
			s = s[end+2:]
		case c >= '0' && c <= '9':
			num := numberRe.FindString(s)
			s = s[len(num):]
			s = strings.TrimLeft(s, "smhdwy") // a duration after offset
		default:
			name := ident.FindString(s)
			if name == "" {
				return nil, fmt.Errorf("unexpected %q", s)
			}
			s = s[len(name):]
			rest := strings.TrimLeft(s, " \n\t")
			switch {
			case slices.Contains(promqlWords, name):
				labelList = slices.Contains([]string{"by", "without", "on", "ignoring", "group_left", "group_right"}, name)
				continue
			case strings.HasPrefix(rest, "("):
				return nil, fmt.Errorf("unknown function %s: add it to promqlWords", name)
			}
			sel := selector{name: name}
			if strings.HasPrefix(rest, "{") {
				rest = rest[1:]
				for !strings.HasPrefix(strings.TrimLeft(rest, " "), "}") {
					m := matcherRe.FindStringSubmatch(rest)
					if m == nil {
						return nil, fmt.Errorf("bad matcher at %q", rest)
					}
					sel.matchers = append(sel.matchers, labelMatcher{m[1], m[2], m[3]})
					rest = rest[len(m[0]):]
				}
				rest = strings.TrimLeft(rest, " ")[1:]
				s = rest
			}
			out = append(out, sel)
		}
	}
	return out, nil
}

type scraped struct {
	name   string
	labels map[string]string
}

// scrapeSeries reads /metrics once and lists every series, histograms
// expanded into their _bucket (with le), _sum and _count series.
func scrapeSeries(t *testing.T, url string) []scraped {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, res.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(res.Body)
	if err != nil {
		t.Fatalf("parse %s: %v", url, err)
	}
	var out []scraped
	for name, f := range families {
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, lp := range m.GetLabel() {
				labels[lp.GetName()] = lp.GetValue()
			}
			if f.GetType().String() != "HISTOGRAM" {
				out = append(out, scraped{name, labels})
				continue
			}
			out = append(out, scraped{name + "_sum", labels}, scraped{name + "_count", labels})
			for _, b := range m.GetHistogram().GetBucket() {
				bl := maps.Clone(labels)
				bl["le"] = fmt.Sprint(b.GetUpperBound())
				out = append(out, scraped{name + "_bucket", bl})
			}
			// The text format's +Inf bucket is among the parsed ones.
		}
	}
	return out
}

// valuesOf lists, for a failure message, the values the series have for
// the matched labels.
func valuesOf(series []map[string]string, matchers []labelMatcher) string {
	var out []string
	for _, m := range matchers {
		var vs []string
		for _, l := range series {
			if !slices.Contains(vs, l[m.label]) {
				vs = append(vs, l[m.label])
			}
		}
		out = append(out, fmt.Sprintf("%s: %q", m.label, vs))
	}
	return strings.Join(out, "; ")
}
