package deploy_test

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/promql/parser"
)

// This file checks PromQL expressions against what floodgate exports: the
// metric names an expression selects and the labels it matches, groups
// by, joins on or shows must exist in a scrape of the running binary, so a
// renamed metric or label cannot silently empty a dashboard panel or
// disarm an alert.

// targetLabels are the labels Prometheus adds to every series it scrapes
// (the exposition does not carry them).
var targetLabels = []string{"job", "instance"}

// labelSet is a set of label names. The checker uses nil for the labels of
// a selector it already reported as not exported: unknown, so that no
// further error follows from that one.
type labelSet map[string]bool

func newLabelSet(names ...string) labelSet {
	s := labelSet{}
	for _, n := range names {
		s[n] = true
	}
	return s
}

func (s labelSet) String() string { return "(" + strings.Join(slices.Sorted(maps.Keys(s)), ", ") + ")" }

// exposition maps each series name a query can select to the labels its
// series carry, target labels included. A histogram NAME is selectable as
// NAME_bucket (with le), NAME_sum and NAME_count, a summary as NAME (with
// quantile), NAME_sum and NAME_count; the bare name of a classic histogram
// selects nothing.
type exposition map[string]labelSet

// parseExposition reads the Prometheus text format with expfmt.
func parseExposition(r io.Reader) (exposition, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("parsing the exposition: %w", err)
	}
	exp := exposition{}
	add := func(name string, m *dto.Metric, extra ...string) {
		s := exp[name]
		if s == nil {
			s = newLabelSet(targetLabels...)
			exp[name] = s
		}
		for _, lp := range m.GetLabel() {
			s[lp.GetName()] = true
		}
		for _, l := range extra {
			s[l] = true
		}
	}
	for name, f := range families {
		for _, m := range f.GetMetric() {
			switch f.GetType() {
			case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
				add(name+"_bucket", m, model.BucketLabel)
				add(name+"_sum", m)
				add(name+"_count", m)
			case dto.MetricType_SUMMARY:
				add(name, m, model.QuantileLabel)
				add(name+"_sum", m)
				add(name+"_count", m)
			default:
				add(name, m)
			}
		}
	}
	return exp, nil
}

// promQL is the PromQL parser: Prometheus' own, with its default options.
var promQL = parser.NewParser(parser.Options{})

// checkExpr parses expr and checks it against exp. It returns the labels
// of its result (what a legend or an alert template can show) and every
// problem found.
func checkExpr(exp exposition, expr string) (labelSet, []error) {
	e, err := promQL.ParseExpr(expr)
	if err != nil {
		return nil, []error{fmt.Errorf("does not parse: %w", err)}
	}
	c := &exprChecker{exp: exp}
	out := c.labels(e)
	return out, c.errs
}

// exprChecker follows labels through an expression: from the selectors,
// which must name exported metrics and match labels they carry, up
// through aggregations, functions and binary operators, which must group,
// join and keep only labels their operands carry.
type exprChecker struct {
	exp  exposition
	errs []error
}

func (c *exprChecker) errorf(format string, args ...any) {
	c.errs = append(c.errs, fmt.Errorf(format, args...))
}

// need records an error for each of names that have does not hold.
func (c *exprChecker) need(have labelSet, names []string, where string) {
	if have == nil {
		return // reported already
	}
	for _, n := range names {
		if !have[n] {
			c.errorf("%s: label %q is not on its operand %v", where, n, have)
		}
	}
}

// labels returns the label names of e's result series.
func (c *exprChecker) labels(e parser.Expr) labelSet {
	switch e := e.(type) {
	case *parser.VectorSelector:
		return c.selector(e)
	case *parser.MatrixSelector:
		return c.labels(e.VectorSelector)
	case *parser.SubqueryExpr:
		return c.labels(e.Expr)
	case *parser.ParenExpr:
		return c.labels(e.Expr)
	case *parser.StepInvariantExpr:
		return c.labels(e.Expr)
	case *parser.UnaryExpr:
		return c.labels(e.Expr)
	case *parser.NumberLiteral, *parser.StringLiteral:
		return labelSet{}
	case *parser.AggregateExpr:
		return c.aggregate(e)
	case *parser.Call:
		return c.call(e)
	case *parser.BinaryExpr:
		return c.binary(e)
	}
	c.errorf("%T (%s): not an expression this check knows", e, e)
	return labelSet{}
}

func (c *exprChecker) selector(v *parser.VectorSelector) labelSet {
	if v.Name == "" {
		c.errorf("%s: a selector without a metric name cannot be checked", v)
		return nil
	}
	have, ok := c.exp[v.Name]
	if !ok {
		c.errorf("metric %s is not exported by floodgate", v.Name)
		return nil
	}
	for _, m := range v.LabelMatchers {
		if m.Name != model.MetricNameLabel && !have[m.Name] {
			c.errorf("%s: label %q is not on %s %v", v, m.Name, v.Name, have)
		}
	}
	return maps.Clone(have)
}

func (c *exprChecker) aggregate(a *parser.AggregateExpr) labelSet {
	in := c.labels(a.Expr)
	if a.Param != nil {
		c.labels(a.Param)
	}
	clause := "by"
	if a.Without {
		clause = "without"
	}
	c.need(in, a.Grouping, fmt.Sprintf("%s %s (...)", a.Op, clause))
	switch {
	case a.Op == parser.TOPK || a.Op == parser.BOTTOMK || a.Op == parser.LIMITK || a.Op == parser.LIMIT_RATIO:
		return in // they select series, keeping their labels
	case a.Without:
		out := maps.Clone(in)
		for _, g := range a.Grouping {
			delete(out, g)
		}
		return out
	}
	out := newLabelSet(a.Grouping...)
	if a.Op == parser.COUNT_VALUES {
		if s, ok := a.Param.(*parser.StringLiteral); ok {
			out[s.Val] = true
		}
	}
	return out
}

func (c *exprChecker) call(f *parser.Call) labelSet {
	var in labelSet
	found := false
	for _, a := range f.Args {
		ls := c.labels(a)
		if !found && (a.Type() == parser.ValueTypeVector || a.Type() == parser.ValueTypeMatrix) {
			in, found = ls, true
		}
	}
	if !found || f.Func.ReturnType == parser.ValueTypeScalar {
		return labelSet{}
	}
	if in == nil {
		return nil
	}
	out := maps.Clone(in)
	str := func(i int) string {
		if s, ok := f.Args[i].(*parser.StringLiteral); ok {
			return s.Val
		}
		return ""
	}
	switch f.Func.Name {
	case "histogram_quantile", "histogram_fraction":
		c.need(in, []string{model.BucketLabel}, f.Func.Name)
		delete(out, model.BucketLabel)
	case "label_replace": // (v, dst, replacement, src, regex)
		if src := str(3); src != "" {
			c.need(in, []string{src}, "label_replace")
		}
		out[str(1)] = true
	case "label_join": // (v, dst, separator, src...)
		for i := 3; i < len(f.Args); i++ {
			c.need(in, []string{str(i)}, "label_join")
		}
		out[str(1)] = true
	}
	return out
}

func (c *exprChecker) binary(b *parser.BinaryExpr) labelSet {
	l, r := c.labels(b.LHS), c.labels(b.RHS)
	lVec, rVec := b.LHS.Type() == parser.ValueTypeVector, b.RHS.Type() == parser.ValueTypeVector
	switch {
	case lVec && !rVec:
		return l
	case rVec && !lVec:
		return r
	case !lVec:
		return labelSet{}
	}
	vm := b.VectorMatching
	if vm == nil {
		vm = &parser.VectorMatching{Card: parser.CardOneToOne}
	}
	where := fmt.Sprintf("%s on/ignoring (...)", b.Op)
	if vm.On {
		c.need(l, vm.MatchingLabels, where+" left")
		c.need(r, vm.MatchingLabels, where+" right")
	} else {
		for _, n := range vm.MatchingLabels {
			if l != nil && r != nil && !l[n] && !r[n] {
				c.errorf("%s: label %q is on neither operand %v %v", where, n, l, r)
			}
		}
	}
	if b.Op.IsSetOperator() {
		if b.Op == parser.LOR {
			return unionLabels(l, r)
		}
		return l
	}
	switch vm.Card {
	case parser.CardManyToOne: // group_left: the labels it names come from the right
		c.need(r, vm.Include, "group_left")
		return unionLabels(l, newLabelSet(vm.Include...))
	case parser.CardOneToMany:
		c.need(l, vm.Include, "group_right")
		return unionLabels(r, newLabelSet(vm.Include...))
	}
	if vm.On {
		return newLabelSet(vm.MatchingLabels...)
	}
	out := maps.Clone(l)
	for _, n := range vm.MatchingLabels {
		delete(out, n)
	}
	return out
}

// unionLabels returns the labels of a and b, nil (unknown) if either is.
func unionLabels(a, b labelSet) labelSet {
	if a == nil || b == nil {
		return nil
	}
	out := maps.Clone(a)
	maps.Copy(out, b)
	return out
}

// templateLabels are the label names a text refers to as {{ $labels.NAME }}
// (alert templates) or {{NAME}} (Grafana legends).
var (
	alertLabelRef  = regexp.MustCompile(`\$labels\.([a-zA-Z_][a-zA-Z0-9_]*)`)
	legendLabelRef = regexp.MustCompile(`\{\{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}`)
)

// missingLabels returns the labels text refers to with ref that are not
// in have, sorted; none when have is unknown.
func missingLabels(ref *regexp.Regexp, text string, have labelSet) []string {
	if have == nil {
		return nil
	}
	var missing []string
	for _, m := range ref.FindAllStringSubmatch(text, -1) {
		if !have[m[1]] && !slices.Contains(missing, m[1]) {
			missing = append(missing, m[1])
		}
	}
	sort.Strings(missing)
	return missing
}

// grafanaGlobals are Grafana's built-in variables a query may use, with a
// value that keeps the query valid PromQL.
var grafanaGlobals = map[string]string{
	"__rate_interval": "5m",
	"__interval":      "1m",
	"__range":         "1h",
}

// grafanaVariableRef matches $name, ${name}, ${name:format} and [[name]].
var grafanaVariableRef = regexp.MustCompile(`\$\{([a-zA-Z0-9_]+)(?::[^}]*)?\}|\$([a-zA-Z0-9_]+)|\[\[([a-zA-Z0-9_]+)\]\]`)

// expandGrafana replaces Grafana variables in a query with values that keep
// it PromQL: the globals with durations, the dashboard's own variables (in
// vars) with a regular expression that matches anything. A variable that
// is neither is an error.
func expandGrafana(query string, vars labelSet) (string, error) {
	var errs []error
	out := grafanaVariableRef.ReplaceAllStringFunc(query, func(ref string) string {
		m := grafanaVariableRef.FindStringSubmatch(ref)
		name := m[1] + m[2] + m[3]
		if v, ok := grafanaGlobals[name]; ok {
			return v
		}
		if vars[name] {
			return ".*"
		}
		errs = append(errs, fmt.Errorf("variable %s is not defined by the dashboard", ref))
		return ref
	})
	return out, errors.Join(errs...)
}

// checkerExposition is a scrape for the checker's own tests: a counter, a
// histogram, a summary and a gauge.
const checkerExposition = `# TYPE app_requests_total counter
app_requests_total{route="a",code="200"} 1
# TYPE app_duration_seconds histogram
app_duration_seconds_bucket{route="a",le="0.1"} 1
app_duration_seconds_bucket{route="a",le="+Inf"} 1
app_duration_seconds_sum{route="a"} 0.05
app_duration_seconds_count{route="a"} 1
# TYPE app_gc_seconds summary
app_gc_seconds{quantile="0.5"} 0.001
app_gc_seconds_sum 0.002
app_gc_seconds_count 2
# TYPE app_up gauge
app_up 1
`

// TestObservabilityChecker: the checker accepts what a scrape exports and
// reports a renamed metric, a label a selector, grouping, join, legend or
// alert template uses but the result does not carry, and an unknown
// Grafana variable.
func TestObservabilityChecker(t *testing.T) {
	exp, err := parseExposition(strings.NewReader(checkerExposition))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, expr string
		legend     string // a Grafana legend to check against the result
		wantErr    string // "" for none
	}{
		{"counter", `sum by (route, code) (rate(app_requests_total{job="x", route="a"}[5m]))`, "{{route}} {{code}}", ""},
		{"histogram quantile", `histogram_quantile(0.99, sum by (le, route) (rate(app_duration_seconds_bucket[5m])))`, "{{route}}", ""},
		{"histogram count", `rate(app_duration_seconds_count{instance="i"}[5m])`, "{{route}} {{instance}}", ""},
		{"summary", `app_gc_seconds{quantile="0.5"} + on () group_left app_up`, "", ""},
		{"ratio and filter", `sum by (job) (rate(app_requests_total{code="500"}[5m])) / sum by (job) (rate(app_requests_total[5m])) > 0.1 and on (job) sum by (job) (rate(app_requests_total[5m])) > 1`, "{{job}}", ""},
		{"without", `sum without (code) (app_requests_total)`, "{{route}}", ""},
		{"unless ignoring", `app_requests_total{code="500"} unless ignoring (code) app_requests_total{code="200"}`, "{{code}}", ""},
		{"renamed metric", `rate(app_request_total[5m])`, "", "metric app_request_total is not exported"},
		{"bare histogram name", `app_duration_seconds`, "", "metric app_duration_seconds is not exported"},
		{"unknown matcher label", `app_requests_total{method="GET"}`, "", `label "method" is not on app_requests_total`},
		{"unknown by label", `sum by (method) (app_requests_total)`, "", `sum by (...): label "method"`},
		{"by label aggregated away", `sum by (route) (sum by (code) (app_requests_total))`, "", `sum by (...): label "route"`},
		{"quantile without le", `histogram_quantile(0.5, sum by (route) (rate(app_duration_seconds_bucket[5m])))`, "", `histogram_quantile: label "le"`},
		{"on label missing on the right", `app_requests_total / on (route) app_up`, "", `on/ignoring (...) right: label "route"`},
		{"legend label aggregated away", `sum by (route) (app_requests_total)`, "{{code}}", "legend shows [code]"},
		{"legend label dropped by on", `app_requests_total / on (route) app_duration_seconds_count`, "{{code}}", "legend shows [code]"},
		{"no metric name", `{route="a"}`, "", "without a metric name"},
		{"syntax", `sum by (route (app_up)`, "", "does not parse"},
		{"grafana globals and variables", `rate(app_requests_total{job=~"$job", instance=~"${instance:regex}"}[$__rate_interval])`, "", ""},
		{"undefined grafana variable", `app_up{job=~"$jobs"}`, "", "variable $jobs is not defined"},
	}
	vars := newLabelSet("job", "instance")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var errs []error
			expr, err := expandGrafana(tt.expr, vars)
			if err != nil {
				errs = append(errs, err)
			} else {
				var have labelSet
				have, errs = checkExpr(exp, expr)
				if missing := missingLabels(legendLabelRef, tt.legend, have); len(missing) > 0 {
					errs = append(errs, fmt.Errorf("legend shows %v", missing))
				}
			}
			got := errors.Join(errs...)
			switch {
			case tt.wantErr == "" && got != nil:
				t.Errorf("%s: %v, want no error", tt.expr, got)
			case tt.wantErr != "" && (got == nil || !strings.Contains(got.Error(), tt.wantErr)):
				t.Errorf("%s: %v, want an error containing %q", tt.expr, got, tt.wantErr)
			}
		})
	}

	// A metric not exported is one error, not one more for each label the
	// expression uses on it.
	if _, errs := checkExpr(exp, `sum by (route) (rate(app_request_total{code="500"}[5m])) / on (route) sum by (route) (rate(app_duration_seconds_count[5m]))`); len(errs) != 1 {
		t.Errorf("a renamed metric: %v, want one error", errs)
	}

	// Alert templates: $labels.NAME must be on the result.
	have, _ := checkExpr(exp, `sum by (job, route) (app_requests_total)`)
	if got := missingLabels(alertLabelRef, `{{ $labels.route }} on {{ $labels.instance }} {{ $value }}`, have); !slices.Equal(got, []string{"instance"}) {
		t.Errorf("missing labels of an alert template: %v, want [instance]", got)
	}
}
