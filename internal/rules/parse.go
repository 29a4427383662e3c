package rules

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/floodgate/floodgate/internal/algorithms"
)

// Bounds that keep a hostile or broken file from exhausting memory.
const (
	// maxDepth bounds descriptor nesting (a request has at most this many
	// entries that can match).
	maxDepth = 32
	// maxAliased bounds the YAML nodes visited per file beyond the
	// document's own nodes: what anchors and aliases may expand to.
	maxAliased = 100_000
	// maxErrors bounds the errors reported per file.
	maxErrors = 50
)

// units are envoyproxy/ratelimit's units; month and year are 30 and 365
// days as there.
var units = map[string]time.Duration{
	"second": time.Second,
	"minute": time.Minute,
	"hour":   time.Hour,
	"day":    24 * time.Hour,
	"week":   7 * 24 * time.Hour,
	"month":  30 * 24 * time.Hour,
	"year":   365 * 24 * time.Hour,
}

// pos is a position in a file.
type pos struct{ line, col int }

func posOf(n *yaml.Node) pos { return pos{n.Line, n.Column} }

// fileConfig is one parsed file, before it is merged with the others.
type fileConfig struct {
	name      string
	domain    string
	hasDomain bool
	domainPos pos
	root      *node
	limits    []*Limit
	policies  []policyAt
	quota     *domainQuota // quota_buckets and quota_unmatched (quota.go)
}

type policyAt struct {
	p   Policy
	pos pos
}

// parser walks one file's YAML tree, collecting every problem it finds.
type parser struct {
	file       string
	errs       ErrorList
	visited    int
	budget     int // visits allowed: the document's nodes plus maxAliased
	tooBig     bool
	active     map[*yaml.Node]bool // descriptor lists being read, to catch alias cycles
	domain     string
	defaultAlg algorithms.Algorithm
	// named maps explicit limit names to where they were first declared,
	// and replaces lists the replaces entries to check once all names are
	// known.
	named    map[string]bool
	replaces []replaceRef
}

type replaceRef struct {
	name string
	at   *yaml.Node
}

func (p *parser) errorAt(at pos, format string, args ...any) {
	if len(p.errs) < maxErrors {
		p.errs = append(p.errs, &Error{File: p.file, Line: at.line, Column: at.col, Msg: fmt.Sprintf(format, args...)})
	}
}

func (p *parser) errorf(n *yaml.Node, format string, args ...any) {
	p.errorAt(posOf(n), format, args...)
}

// yamlLine pulls the line out of yaml's syntax errors ("yaml: line 3: ...").
var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

func (p *parser) yamlError(err error) {
	msg := err.Error()
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		p.errorAt(pos{line: line}, "YAML syntax: %s", m[2])
		return
	}
	p.errorAt(pos{}, "YAML syntax: %s", strings.TrimPrefix(msg, "yaml: "))
}

// decode reads the file's single YAML document. The YAML library is not
// trusted to never panic on malformed input; a panic becomes an error.
func decode(data []byte) (doc *yaml.Node, extra *yaml.Node, err error) {
	defer func() {
		if r := recover(); r != nil {
			doc, extra, err = nil, nil, fmt.Errorf("yaml: %v", r)
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var d yaml.Node
	if err := dec.Decode(&d); err != nil {
		return nil, nil, err
	}
	var x yaml.Node
	if err := dec.Decode(&x); err == nil {
		return &d, &x, nil
	} else if !errors.Is(err, io.EOF) {
		return &d, nil, err
	}
	return &d, nil, nil
}

// parseFile parses and validates one file.
func parseFile(name string, data []byte) (*fileConfig, ErrorList) {
	p := &parser{file: name, named: map[string]bool{}, active: map[*yaml.Node]bool{}}
	fc := &fileConfig{name: name}
	doc, extra, err := decode(data)
	switch {
	case errors.Is(err, io.EOF):
		p.errorAt(pos{}, "empty file: want a domain with descriptors, or policies")
		return nil, p.errs
	case err != nil:
		p.yamlError(err)
		return nil, p.errs
	case extra != nil:
		p.errorf(extra, "a second YAML document: put one domain in each file")
		return nil, p.errs
	}
	p.budget = countNodes(doc) + maxAliased
	root := doc
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) == 0 {
			p.errorAt(pos{}, "empty file: want a domain with descriptors, or policies")
			return nil, p.errs
		}
		root = root.Content[0]
	}
	f, ok := p.fields(root, "the file", "domain", "descriptors", "default_algorithm", "policies",
		"quota_buckets", "quota_unmatched")
	if !ok {
		return nil, p.errs
	}
	if v := f["default_algorithm"]; v != nil {
		if s, ok := p.str(v); ok {
			a, err := algorithms.ParseAlgorithm(s)
			if err != nil {
				p.errorf(v, "default_algorithm: %v", err)
			}
			p.defaultAlg = a
		}
	}
	if v := f["domain"]; v != nil {
		fc.domainPos = posOf(v)
		if s, ok := p.str(v); ok {
			if s == "" {
				p.errorf(v, "empty domain")
			}
			fc.domain, fc.hasDomain = s, true
		}
	}
	if v := f["policies"]; v != nil {
		fc.policies = p.policies(v)
	}
	switch {
	case f["domain"] == nil && f["policies"] == nil:
		p.errorf(root, "missing domain: each file names one domain (or holds only policies)")
	case f["domain"] == nil && f["descriptors"] != nil:
		p.errorf(f["descriptors"], "descriptors without a domain: add a domain key")
	case f["domain"] == nil && (f["quota_buckets"] != nil || f["quota_unmatched"] != nil):
		p.errorf(root, "quota_buckets and quota_unmatched need a domain: add a domain key")
	}
	p.domain = fc.domain
	fc.root = &node{}
	if v := f["descriptors"]; v != nil && fc.hasDomain {
		p.descriptors(fc.root, v, nil, fc.domain, 1)
	}
	if fc.hasDomain {
		p.quotaFields(fc, f["quota_buckets"], f["quota_unmatched"])
	}
	for _, r := range p.replaces {
		if !p.named[r.name] {
			p.errorf(r.at, "replaces names %q, but no limit in domain %q has that name", r.name, fc.domain)
		}
	}
	if len(p.errs) > 0 {
		return nil, p.errs
	}
	fc.limits = collectLimits(fc.root, nil)
	return fc, nil
}

func collectLimits(n *node, out []*Limit) []*Limit {
	out = append(out, n.limits...)
	var kids []*node
	for _, c := range n.exact {
		kids = append(kids, c)
	}
	for _, c := range n.keyOnly {
		kids = append(kids, c)
	}
	for _, c := range kids {
		out = collectLimits(c, out)
	}
	return out
}

// visit counts n against the per-file budget and follows aliases. It
// returns nil when the budget is spent.
func (p *parser) visit(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 100; i++ {
		n = n.Alias
	}
	p.visited++
	if p.visited > p.budget || n == nil || n.Kind == yaml.AliasNode {
		if !p.tooBig {
			p.tooBig = true
			p.errorAt(pos{}, "aliases expand too far (more than %d YAML nodes beyond the file's own)", maxAliased)
		}
		return nil
	}
	return n
}

// deref follows aliases without counting: for a node that visit has
// already counted (each place in the file counts once).
func deref(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 100; i++ {
		n = n.Alias
	}
	return n
}

// countNodes counts the document's nodes without following aliases.
func countNodes(n *yaml.Node) int {
	count := 0
	stack := []*yaml.Node{n}
	for len(stack) > 0 {
		n, stack = stack[len(stack)-1], stack[:len(stack)-1]
		count++
		stack = append(stack, n.Content...)
	}
	return count
}

// fields reads a mapping whose keys must be among allowed, reporting
// unknown and duplicate keys. It returns the values by key.
func (p *parser) fields(n *yaml.Node, what string, allowed ...string) (map[string]*yaml.Node, bool) {
	if n = p.visit(n); n == nil {
		return nil, false
	}
	if n.Kind != yaml.MappingNode {
		p.errorf(n, "%s must be a mapping, got %s", what, kindName(n))
		return nil, false
	}
	out := make(map[string]*yaml.Node, len(n.Content)/2)
	keys := make(map[string]*yaml.Node, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k = p.visit(k); k == nil {
			return nil, false
		}
		if k.Kind != yaml.ScalarNode {
			p.errorf(k, "%s: keys must be plain names, got %s", what, kindName(k))
			continue
		}
		if first := keys[k.Value]; first != nil {
			p.errorf(k, "duplicate key %q in %s (first at line %d)", k.Value, what, first.Line)
			continue
		}
		keys[k.Value] = k
		if !contains(allowed, k.Value) {
			p.errorf(k, "unknown key %q in %s (want one of %s)", k.Value, what, strings.Join(allowed, ", "))
			continue
		}
		out[k.Value] = v
	}
	return out, true
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return "nothing"
		}
		return fmt.Sprintf("%q", n.Value)
	}
	return "something else"
}

// str reads a scalar as text, as envoyproxy/ratelimit's YAML library does
// (value: 123 is the string "123"; an empty value is "").
func (p *parser) str(n *yaml.Node) (string, bool) {
	if n = p.visit(n); n == nil {
		return "", false
	}
	if n.Kind != yaml.ScalarNode {
		p.errorf(n, "want a string, got %s", kindName(n))
		return "", false
	}
	if n.Tag == "!!null" {
		return "", true
	}
	return n.Value, true
}

func (p *parser) boolean(n *yaml.Node, name string) bool {
	if n = p.visit(n); n == nil {
		return false
	}
	var b bool
	if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" || n.Decode(&b) != nil {
		p.errorf(n, "%s must be true or false, got %s", name, kindName(n))
		return false
	}
	return b
}

func (p *parser) integer(n *yaml.Node, name string) (int64, bool) {
	if n = p.visit(n); n == nil {
		return 0, false
	}
	var v int64
	if n.Kind != yaml.ScalarNode || n.Tag != "!!int" || n.Decode(&v) != nil {
		p.errorf(n, "%s must be an integer, got %s", name, kindName(n))
		return 0, false
	}
	return v, true
}

func (p *parser) list(n *yaml.Node, name string) ([]*yaml.Node, bool) {
	if n = p.visit(n); n == nil {
		return nil, false
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil, true // "descriptors:" with nothing under it
	}
	if n.Kind != yaml.SequenceNode {
		p.errorf(n, "%s must be a list, got %s", name, kindName(n))
		return nil, false
	}
	return n.Content, true
}

func (p *parser) duration(n *yaml.Node, name string) (time.Duration, bool) {
	if n = p.visit(n); n == nil {
		return 0, false
	}
	d, err := time.ParseDuration(n.Value)
	if n.Kind != yaml.ScalarNode || err != nil {
		p.errorf(n, "%s must be a duration such as \"1s\", \"15m\" or \"1500ms\", got %s", name, kindName(n))
		return 0, false
	}
	if d <= 0 || d%time.Millisecond != 0 {
		p.errorf(n, "%s must be a positive whole number of milliseconds, got %v", name, d)
		return 0, false
	}
	return d, true
}

func (p *parser) failureMode(n *yaml.Node) FailureMode {
	s, ok := p.str(n)
	switch {
	case !ok:
		return FailureDefault
	case s == "open":
		return FailureOpen
	case s == "closed":
		return FailureClosed
	}
	p.errorf(n, "failure_mode must be open or closed, got %q", s)
	return FailureDefault
}

func (p *parser) algorithm(n *yaml.Node) algorithms.Algorithm {
	s, ok := p.str(n)
	if !ok {
		return algorithms.Unspecified
	}
	a, err := algorithms.ParseAlgorithm(s)
	if err != nil {
		p.errorf(n, "algorithm: %v", err)
	}
	return a
}

var descriptorKeys = []string{
	"key", "value", "rate_limit", "rate_limits", "descriptors", "shadow_mode",
	"detailed_metric", "value_to_metric", "share_threshold", "quota_mode", "metadata",
}

// quotaModeMsg rejects quota_mode: true. In envoyproxy/ratelimit a quota-
// mode limit only reports that it is exceeded (the request is denied when
// every quota-mode descriptor is over); floodgate has no quota mode and
// would enforce the limit instead, so such a file is refused rather than
// served with another meaning.
const quotaModeMsg = "quota_mode: true is not supported: floodgate would enforce this limit, " +
	"where the reference only reports it (shadow_mode: true counts without enforcing)"

// descriptors reads a list of descriptor nodes into parent's children.
// path is the chain of levels above; depth is 1 for the domain's list. It
// returns the number of limits read at or below the list.
func (p *parser) descriptors(parent *node, list *yaml.Node, path []level, prefix string, depth int) int {
	target := deref(list)
	if p.active[target] {
		p.errorf(list, "descriptors contain themselves through an alias")
		return 0
	}
	p.active[target] = true
	defer delete(p.active, target)
	items, ok := p.list(list, "descriptors")
	if !ok {
		return 0
	}
	if depth > maxDepth && len(items) > 0 {
		p.errorf(list, "descriptors nest deeper than %d levels", maxDepth)
		return 0
	}
	total := 0
	firsts := map[kv]*yaml.Node{}
	for _, item := range items {
		f, ok := p.fields(item, "a descriptor", descriptorKeys...)
		if !ok {
			continue
		}
		item = deref(item) // fields counted it
		errsBefore := len(p.errs)
		var key, value string
		if v := f["key"]; v == nil {
			p.errorf(item, "descriptor has no key")
			continue
		} else if key, ok = p.str(v); !ok {
			continue
		} else if key == "" {
			p.errorf(v, "descriptor has an empty key")
			continue
		}
		if v := f["value"]; v != nil {
			value, _ = p.str(v)
		}
		id := kv{key, value}
		if first := firsts[id]; first != nil {
			what := fmt.Sprintf("key %q", key)
			if value != "" {
				what += fmt.Sprintf(" with value %q", value)
			}
			p.errorf(item, "duplicate descriptor: %s is already defined at line %d, column %d", what, first.Line, first.Column)
			continue
		}
		firsts[id] = item

		lv := level{key: key, value: value, wildcard: isWildcard(value)}
		if v := f["share_threshold"]; v != nil && p.boolean(v, "share_threshold") {
			if !lv.wildcard {
				p.errorf(v, "share_threshold needs a wildcard value (one with a '*'); %q has none", value)
			}
			lv.shared = lv.wildcard
		}
		if v := f["value_to_metric"]; v != nil {
			lv.valueToMetric = p.boolean(v, "value_to_metric")
		}
		if v := f["quota_mode"]; v != nil && p.boolean(v, "quota_mode") {
			p.errorf(v, quotaModeMsg)
		}
		// metadata is free-form and ignored.

		n := &node{key: key, value: value}
		here := append(append([]level(nil), path...), lv)
		name := prefix + "." + key
		if value != "" {
			name += "_" + value
		}
		p.limits(n, f, here, name)
		below := len(n.limits)
		if v := f["descriptors"]; v != nil {
			below += p.descriptors(n, v, here, name, depth+1)
		}
		// Flags that shape the counters or metrics of the limits at or
		// below this level do nothing without one: say so rather than
		// accept a file that does not do what it reads as.
		if below == 0 && len(p.errs) == errsBefore {
			if lv.valueToMetric {
				p.errorf(f["value_to_metric"], "value_to_metric has no effect: no rate_limit at or below this descriptor")
			}
			if lv.shared {
				p.errorf(f["share_threshold"], "share_threshold has no effect: no rate_limit at or below this descriptor")
			}
		}
		total += below
		parent.add(n, lv)
	}
	return total
}

// add links child c under n.
func (n *node) add(c *node, lv level) {
	if lv.value == "" {
		if n.keyOnly == nil {
			n.keyOnly = map[string]*node{}
		}
		n.keyOnly[lv.key] = c
		return
	}
	if n.exact == nil {
		n.exact = map[kv]*node{}
	}
	n.exact[kv{lv.key, lv.value}] = c
	if lv.wildcard {
		if n.wild == nil {
			n.wild = map[string][]wildKV{}
		}
		n.wild[lv.key] = append(n.wild[lv.key], wildKV{pat: compilePattern(lv.value), n: c})
	}
}

var rateLimitKeys = []string{
	"unit", "unit_multiplier", "requests_per_unit", "unlimited", "name", "replaces",
	"algorithm", "burst", "period", "failure_mode", "shadow_mode", "quota_mode",
}

// limits reads a descriptor's rate_limit or rate_limits into n.limits.
func (p *parser) limits(n *node, f map[string]*yaml.Node, path []level, name string) {
	var objs []*yaml.Node
	one, many := f["rate_limit"], f["rate_limits"]
	switch {
	case one != nil && many != nil:
		p.errorf(many, "a descriptor takes rate_limit or rate_limits, not both")
		return
	case one != nil:
		objs = []*yaml.Node{one}
	case many != nil:
		var ok bool
		if objs, ok = p.list(many, "rate_limits"); !ok {
			return
		}
	}
	nodeShadow := f["shadow_mode"] != nil && p.boolean(f["shadow_mode"], "shadow_mode")
	detailed := f["detailed_metric"] != nil && p.boolean(f["detailed_metric"], "detailed_metric")
	if len(objs) == 0 {
		// As in the reference, both apply to this descriptor's limits only.
		if nodeShadow {
			p.errorf(f["shadow_mode"], "shadow_mode applies to this descriptor's own rate_limit, and it has none (it does not reach nested descriptors)")
		}
		if detailed {
			p.errorf(f["detailed_metric"], "detailed_metric applies to this descriptor's own rate_limit, and it has none (it does not reach nested descriptors)")
		}
		return
	}
	metricValues := false
	for _, lv := range path {
		metricValues = metricValues || lv.valueToMetric
	}
	for i, obj := range objs {
		l := p.rateLimit(obj)
		if l == nil {
			continue
		}
		l.Domain = p.domain
		l.ShadowMode = l.ShadowMode || nodeShadow
		l.DetailedMetric = detailed
		l.path = path
		l.metricValues = metricValues
		l.ID = limitID(p.domain, path, i)
		l.keyID = keyID(l.ID)
		if l.Name == "" {
			l.Name = name
			if len(objs) > 1 {
				l.Name += "#" + strconv.Itoa(i)
			}
		}
		n.limits = append(n.limits, l)
	}
	if len(n.limits) > 1 {
		for _, l := range n.limits {
			if l.Unlimited {
				p.errorf(many, "unlimited cannot be combined with other limits on one descriptor")
				break
			}
		}
	}
}

// keyID is the short, fixed-length stand-in for id at the head of store
// keys: 16 base64url characters (96 bits) of its SHA-256. Store keys stay
// short whatever the rule's path (a Redis token-bucket key costs under 100
// bytes), and two rules collide with probability 2^-96 per pair.
func keyID(id string) string {
	sum := sha256.Sum256([]byte(id))
	return base64.RawURLEncoding.EncodeToString(sum[:12])
}

// limitID is the Limit.ID: the domain, every level's key (and value) quoted,
// and the index.
func limitID(domain string, path []level, i int) string {
	var b strings.Builder
	b.WriteString(strconv.Quote(domain))
	for _, lv := range path {
		b.WriteByte('/')
		b.WriteString(strconv.Quote(lv.key))
		if lv.value != "" {
			b.WriteByte('=')
			b.WriteString(strconv.Quote(lv.value))
		}
	}
	b.WriteByte('#')
	b.WriteString(strconv.Itoa(i))
	return b.String()
}

// rateLimit reads one rate_limit object.
func (p *parser) rateLimit(obj *yaml.Node) *Limit {
	f, ok := p.fields(obj, "rate_limit", rateLimitKeys...)
	if !ok {
		return nil
	}
	obj = deref(obj) // fields counted it
	errsBefore := len(p.errs)
	l := &Limit{}
	if v := f["name"]; v != nil {
		if s, ok := p.str(v); ok && s != "" {
			l.Name, l.explicitName = s, true
			p.named[s] = true
		}
	}
	if v := f["replaces"]; v != nil {
		p.replacesList(l, v)
	}
	if v := f["shadow_mode"]; v != nil {
		l.ShadowMode = p.boolean(v, "shadow_mode")
	}
	if v := f["quota_mode"]; v != nil && p.boolean(v, "quota_mode") {
		p.errorf(v, quotaModeMsg)
	}
	if v := f["failure_mode"]; v != nil {
		l.FailureMode = p.failureMode(v)
	}
	if v := f["unlimited"]; v != nil && p.boolean(v, "unlimited") {
		l.Unlimited = true
		for _, k := range []string{"unit", "unit_multiplier", "period", "requests_per_unit", "algorithm", "burst", "failure_mode", "shadow_mode"} {
			if v := f[k]; v != nil {
				if k == "unit" {
					p.errorf(v, "should not specify rate limit unit when unlimited")
				} else {
					p.errorf(v, "%s does not apply to an unlimited rate_limit", k)
				}
			}
		}
		return l
	}

	// The period: unit (times unit_multiplier), or our period.
	unit, period, mult := f["unit"], f["period"], f["unit_multiplier"]
	switch {
	case unit != nil && period != nil:
		p.errorf(period, "give unit (with unit_multiplier) or period, not both")
	case unit != nil:
		if s, ok := p.str(unit); ok {
			d, known := units[strings.ToLower(s)]
			if !known {
				p.errorf(unit, "invalid rate limit unit %q (want second, minute, hour, day, week, month or year)", s)
			}
			l.Rate.Period = d
		}
		if mult != nil {
			if m, ok := p.integer(mult, "unit_multiplier"); ok {
				if m <= 0 {
					p.errorf(mult, "unit_multiplier must be positive, got %d", m)
				} else if l.Rate.Period > 0 && m > int64(1<<62)/int64(l.Rate.Period) {
					p.errorf(mult, "unit_multiplier %d makes the period too long", m)
				} else {
					l.Rate.Period *= time.Duration(m)
				}
			}
		}
	case period != nil:
		if mult != nil {
			p.errorf(mult, "unit_multiplier goes with unit, not with period")
		}
		l.Rate.Period, _ = p.duration(period, "period")
	default:
		p.errorf(obj, "rate_limit needs a unit (or period), or unlimited: true")
	}

	if v := f["requests_per_unit"]; v == nil {
		p.errorf(obj, "rate_limit needs requests_per_unit (0 denies every matching request)")
	} else if r, ok := p.integer(v, "requests_per_unit"); ok {
		if r < 0 {
			p.errorf(v, "requests_per_unit must not be negative, got %d", r)
		}
		l.Rate.Requests = r
	}

	l.Rate.Algorithm = algorithms.FixedWindow
	if p.defaultAlg.Valid() {
		l.Rate.Algorithm = p.defaultAlg
	}
	if v := f["algorithm"]; v != nil {
		l.Rate.Algorithm = p.algorithm(v)
	}
	if v := f["burst"]; v != nil {
		if b, ok := p.integer(v, "burst"); ok {
			switch {
			case b <= 0:
				p.errorf(v, "burst must be positive, got %d", b)
			case l.Rate.Algorithm.Valid() && l.Rate.Algorithm != algorithms.TokenBucket:
				p.errorf(v, "burst applies only to token_bucket, not %v", l.Rate.Algorithm)
			default:
				l.Rate.Burst = b
			}
		}
	}
	if len(p.errs) > errsBefore {
		return nil
	}
	if l.Rate.Requests == 0 {
		if v := f["burst"]; v != nil {
			p.errorf(v, "burst does not apply when requests_per_unit is 0 (every matching request is denied)")
			return nil
		}
		l.DenyAll = true
		return l
	}
	if err := l.Rate.Validate(); err != nil {
		p.errorf(obj, "%v", err)
		return nil
	}
	return l
}

func (p *parser) replacesList(l *Limit, v *yaml.Node) {
	items, ok := p.list(v, "replaces")
	if !ok {
		return
	}
	for _, it := range items {
		f, ok := p.fields(it, "a replaces entry", "name")
		if !ok {
			continue
		}
		nv := f["name"]
		if nv == nil {
			p.errorf(deref(it), "a replaces entry needs a name")
			continue
		}
		s, ok := p.str(nv)
		switch {
		case !ok:
		case s == "":
			p.errorf(nv, "should not have an empty replaces entry")
		case s == l.Name:
			p.errorf(nv, "replaces should not contain the name of the same limit (%q)", s)
		default:
			l.Replaces = append(l.Replaces, s)
			p.replaces = append(p.replaces, replaceRef{name: s, at: nv})
		}
	}
}

var policyKeys = []string{
	"algorithm", "requests", "period", "burst", "failure_mode", "shadow_mode",
	"requests_per_second", "requests_per_min", "requests_per_hour",
}

// shorthands are the seeds' tier fields: requests per fixed period.
var shorthands = []struct {
	key    string
	period time.Duration
}{
	{"requests_per_second", time.Second},
	{"requests_per_min", time.Minute},
	{"requests_per_hour", time.Hour},
}

// policies reads the top-level policies map.
func (p *parser) policies(n *yaml.Node) []policyAt {
	if n = p.visit(n); n == nil {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		p.errorf(n, "policies must be a mapping of names to limits, got %s", kindName(n))
		return nil
	}
	var out []policyAt
	seen := map[string]*yaml.Node{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := p.visit(n.Content[i])
		if k == nil {
			return nil
		}
		if k.Kind != yaml.ScalarNode || k.Value == "" {
			p.errorf(k, "a policy needs a non-empty name")
			continue
		}
		if first := seen[k.Value]; first != nil {
			p.errorf(k, "duplicate policy %q (first at line %d)", k.Value, first.Line)
			continue
		}
		seen[k.Value] = k
		if pol, ok := p.policy(k.Value, n.Content[i+1]); ok {
			out = append(out, policyAt{p: pol, pos: posOf(k)})
		}
	}
	return out
}

func (p *parser) policy(name string, n *yaml.Node) (Policy, bool) {
	what := fmt.Sprintf("policy %q", name)
	f, ok := p.fields(n, what, policyKeys...)
	if !ok {
		return Policy{}, false
	}
	n = deref(n) // fields counted it
	errsBefore := len(p.errs)
	pol := Policy{Name: name}
	// Policies serve our own API, so the default is the token bucket, not
	// the compatibility fixed window.
	pol.Rate.Algorithm = algorithms.TokenBucket
	if p.defaultAlg.Valid() {
		pol.Rate.Algorithm = p.defaultAlg
	}
	if v := f["algorithm"]; v != nil {
		pol.Rate.Algorithm = p.algorithm(v)
	}
	var given []string
	if v := f["requests"]; v != nil {
		given = append(given, "requests")
		if r, ok := p.integer(v, "requests"); ok {
			pol.Rate.Requests = r
		}
		if pv := f["period"]; pv == nil {
			p.errorf(v, "%s: requests needs a period", what)
		} else {
			pol.Rate.Period, _ = p.duration(pv, "period")
		}
	} else if pv := f["period"]; pv != nil {
		p.errorf(pv, "%s: period needs requests", what)
	}
	for _, s := range shorthands {
		if v := f[s.key]; v != nil {
			given = append(given, s.key)
			if r, ok := p.integer(v, s.key); ok {
				pol.Rate.Requests, pol.Rate.Period = r, s.period
			}
		}
	}
	switch {
	case len(given) == 0:
		p.errorf(n, "%s needs requests with period, or one of requests_per_second, requests_per_min, requests_per_hour", what)
	case len(given) > 1:
		p.errorf(n, "%s: give only one of %s", what, strings.Join(given, ", "))
	}
	if v := f["burst"]; v != nil {
		if b, ok := p.integer(v, "burst"); ok {
			switch {
			case b <= 0:
				p.errorf(v, "burst must be positive, got %d", b)
			case pol.Rate.Algorithm.Valid() && pol.Rate.Algorithm != algorithms.TokenBucket:
				p.errorf(v, "burst applies only to token_bucket, not %v", pol.Rate.Algorithm)
			default:
				pol.Rate.Burst = b
			}
		}
	}
	if v := f["failure_mode"]; v != nil {
		pol.FailureMode = p.failureMode(v)
	}
	if v := f["shadow_mode"]; v != nil {
		pol.ShadowMode = p.boolean(v, "shadow_mode")
	}
	if len(p.errs) > errsBefore {
		return Policy{}, false
	}
	if err := pol.Rate.Validate(); err != nil {
		p.errorf(n, "%s: %v", what, err)
		return Policy{}, false
	}
	return pol, true
}
