package rules

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/internal/softlimit"
)

// FailureMode says what a limit does when the store cannot decide.
type FailureMode int

// The failure modes. FailureDefault defers to the server's --failure-mode.
// FailureLocal enforces, in the replica's memory, the replica's share of
// the limit (the limit divided by the live replicas known before the
// outage; see the README's failure modes).
const (
	FailureDefault FailureMode = iota
	FailureOpen
	FailureClosed
	FailureLocal
)

// failureModes are the modes' names; "default" is written nowhere: it is
// a limit without failure_mode.
var failureModes = [...]string{FailureDefault: "default", FailureOpen: "open", FailureClosed: "closed", FailureLocal: "local"}

// String returns the mode's name: "open", "closed" or "local" (as written
// in a rule and in --failure-mode), or "default" for FailureDefault.
func (m FailureMode) String() string {
	if m >= 0 && int(m) < len(failureModes) {
		return failureModes[m]
	}
	return fmt.Sprintf("failure_mode(%d)", int(m))
}

// UnmarshalText reads "open", "closed" or "local" in any case ("Closed", "OPEN"):
// the one parser of the failure_mode of rules and of serve's
// --failure-mode. Anything else is an error whose message continues the
// name of the setting it is read for, as in fmt.Errorf("--failure-mode
// %w", err): `must be open, closed or local, got "x"`.
func (m *FailureMode) UnmarshalText(text []byte) error {
	for i := FailureOpen; int(i) < len(failureModes); i++ {
		if strings.EqualFold(string(text), failureModes[i]) {
			*m = i
			return nil
		}
	}
	*m = FailureDefault
	return fmt.Errorf("must be open, closed or local, got %q", text)
}

// Limit is one configured limit. Limits returned by Match and MatchRequest
// are shared by every caller and must not be modified.
type Limit struct {
	// Name is rate_limit.name, or a name derived from the rule's place in
	// the tree the way envoyproxy/ratelimit names its stats:
	// "domain.key_value.key2" (plus "#i" when a descriptor carries several
	// unnamed limits). Bounded by the config, so safe as a metric label.
	Name string
	// ID is stable across reloads of an unchanged rule and unique within
	// the Set: the domain, the rule's path (keys and configured values,
	// quoted) and the limit's index on its descriptor. Two different limits
	// never share an ID. The store key of one request is ID plus the
	// request's values; AppendKey builds it.
	ID string
	// Domain is the domain the limit belongs to.
	Domain string
	// Rate is the rate to enforce: the algorithm (rate_limit.algorithm,
	// else the file's default_algorithm, else algorithms.Compatible, which
	// is how envoyproxy/ratelimit counts), requests, period and burst. Zero
	// when Unlimited. Valid (algorithms.Limit.Validate) unless Unlimited or
	// DenyAll.
	Rate algorithms.Limit
	// Unlimited rules answer OK without touching the store.
	Unlimited bool
	// DenyAll marks requests_per_unit: 0 (a ban list): every matching
	// request is over the limit, no store needed. Rate.Requests is then 0
	// and Rate.Period is still the configured period (for reset headers).
	DenyAll bool
	// ShadowMode decides and counts but answers OK.
	ShadowMode bool
	// QuotaMode (quota_mode: true on the descriptor, or on one of its
	// rate_limits) makes the limit a quota for service selection, as in
	// envoyproxy/ratelimit: a request is over the limit when a limit not
	// in quota mode is over, or when every quota-mode descriptor of the
	// request is; a quota-mode descriptor over its limit still answers
	// OVER_LIMIT in its own status.
	QuotaMode bool
	// Metadata is the descriptor's free-form `metadata`, returned to Envoy
	// in the response's dynamic_metadata when the limit's descriptor
	// passes (see the server's DynamicMetadata). nil when the descriptor
	// has none. Shared: never modify.
	Metadata *structpb.Struct
	// ChargeAfter (rate_limit `charge: after`) marks a descriptor Envoy
	// sends once the usage is known (apply_on_stream_done, with the actual
	// cost in hits_addend): its hits are charged as debt
	// (algorithms.Debt), never refused, and it is answered OK. The
	// default, `charge: before`, decides on the request path.
	ChargeAfter bool
	// FailureMode applies when the store cannot decide.
	FailureMode FailureMode
	// Warn is the warning threshold (warn_at): an allowed decision at or
	// above it says so to the client. Zero when none.
	Warn softlimit.Threshold
	// DetailedMetric asks for per-value metrics (see MetricName).
	DetailedMetric bool
	// Replaces names the limits this one replaces within one request.
	Replaces []string

	src          srcRef  // where the rate_limit was written (see Source)
	keyID        string  // short digest of ID heading store keys (see keyID)
	explicitName bool    // Name came from rate_limit.name
	path         []level // the tree nodes from the domain down to this limit
	metricValues bool    // some level has value_to_metric
}

// level is one node on a limit's path.
type level struct {
	key, value    string
	wildcard      bool // value holds a '*' (see pattern)
	cidr          bool // match: cidr: value is a network in canonical form (cidr.go)
	shared        bool // share_threshold: every value matching the wildcard or network shares one counter
	valueToMetric bool
}

// ConfiguredName is rate_limit.name as written, or "" when the limit has
// none (Name then holds a derived name). envoyproxy/ratelimit answers
// current_limit.name with it.
func (l *Limit) ConfiguredName() string {
	if l.explicitName {
		return l.Name
	}
	return ""
}

// Shared reports whether the value of entry i does not take part in the
// counter key, because entry i matched a share_threshold wildcard or
// network.
func (l *Limit) Shared(i int) bool { return i >= 0 && i < len(l.path) && l.path[i].shared }

// MetricName is the name to report entries under. Without detailed_metric
// or value_to_metric it is Name. With detailed_metric it is envoyproxy/
// ratelimit's detailed key, "domain.key_value.key2_value2" with the
// request's values (a share_threshold level keeps its wildcard); with
// value_to_metric on some levels, those levels show the request's value and
// the others their configured value. Such names are unbounded (they hold
// request values): use them only where the operator opted in.
func (l *Limit) MetricName(entries []Entry) string {
	if !l.DetailedMetric && !l.metricValues {
		return l.Name
	}
	var b strings.Builder
	b.WriteString(l.Domain)
	for i, lv := range l.path {
		b.WriteByte('.')
		b.WriteString(lv.key)
		v := lv.value
		if i < len(entries) && !lv.shared && (l.DetailedMetric || lv.valueToMetric) {
			v = entries[i].Value
		}
		if v != "" {
			b.WriteByte('_')
			b.WriteString(v)
		}
	}
	return b.String()
}

// Policy is a named limit for the Check API (the top-level policies map).
type Policy struct {
	Name        string
	Rate        algorithms.Limit
	FailureMode FailureMode
	ShadowMode  bool
	// Warn is the warning threshold (warn_at); zero when none.
	Warn softlimit.Threshold
}

// Entry is one descriptor entry of a request.
type Entry struct{ Key, Value string }

// Set is a loaded, validated configuration: the descriptor trees of its
// domains and its named policies. It is immutable and safe for concurrent
// use; a reload builds a new Set.
type Set struct {
	domains  map[string]*node
	policies map[string]Policy
	quota    map[string]*domainQuota // quota_buckets by domain (quota.go)
	files    []string
	limits   []*Limit
	digest   string
	loadedAt time.Time         // when build ran (source.go)
	policyAt map[string]Source // where each policy's name was written
}

// node is one descriptor of the tree; a domain's root has no key.
type node struct {
	key, value string
	src        srcRef // where the descriptor was written (for Explain)
	limits     []*Limit
	exact      map[kv]*node          // key+value, wildcards included by their literal value
	wild       map[string][]wildKV   // key -> wildcards in config order
	cidr       map[string]*cidrTable // key -> match: cidr networks
	network    bool                  // this node is a match: cidr network (value as written)
	keyOnly    map[string]*node
}

// children returns every node one level below n.
func (n *node) children() []*node {
	kids := slices.Collect(maps.Values(n.exact))
	for _, t := range n.cidr {
		kids = t.nodes(kids)
	}
	return slices.AppendSeq(kids, maps.Values(n.keyOnly))
}

type kv struct{ k, v string }

type wildKV struct {
	pat pattern
	n   *node
}

// child finds the node for e one level down: exact key+value first, then
// the longest match: cidr network holding the value, then the first
// wildcard (in file order) the value matches, then the key-only node.
func (n *node) child(e Entry) *node {
	if c := n.exact[kv{e.Key, e.Value}]; c != nil {
		return c
	}
	if t := n.cidr[e.Key]; t != nil {
		if c := t.lookup(e.Value); c != nil {
			return c
		}
	}
	ws := n.wild[e.Key]
	for i := range ws {
		if ws[i].pat.match(e.Value) {
			return ws[i].n
		}
	}
	return n.keyOnly[e.Key]
}

// Policy returns the named policy.
func (c *Set) Policy(name string) (Policy, bool) {
	if c == nil {
		return Policy{}, false
	}
	p, ok := c.policies[name]
	return p, ok
}

// Policies returns every policy, sorted by name.
func (c *Set) Policies() []Policy {
	if c == nil {
		return nil
	}
	return slices.SortedFunc(maps.Values(c.policies), func(a, b Policy) int { return strings.Compare(a.Name, b.Name) })
}

// HasDomain reports whether domain has a config file.
func (c *Set) HasDomain(domain string) bool {
	if c == nil {
		return false
	}
	_, ok := c.domains[domain]
	return ok
}

// Match returns the limits that apply to one descriptor, or nil when
// nothing applies (an unknown domain, no rule, or a rule at another depth).
// It walks the domain's tree one level per entry; at each level the
// descriptor with the entry's key and exact value wins, then the longest
// `match: cidr` network holding the value (an address), then the first
// wildcard (in file order) the value matches ('*' anywhere in the
// configured value stands for any run of characters), then the descriptor
// with the key alone. A limit applies only when it sits at
// exactly the depth of the last entry. The result is shared: do not modify
// it. Match does not allocate.
func (c *Set) Match(domain string, entries []Entry) []*Limit {
	if c == nil || len(entries) == 0 {
		return nil
	}
	n := c.domains[domain]
	if n == nil {
		return nil
	}
	for _, e := range entries {
		if n = n.child(e); n == nil {
			return nil
		}
	}
	if len(n.limits) == 0 {
		return nil
	}
	return n.limits
}

// MatchRequest matches every descriptor of one request (out[i] belongs to
// descriptors[i]) and then drops every limit whose explicit name appears in
// the replaces list of any limit matched by the same request, as
// envoyproxy/ratelimit does. The inner slices must not be modified.
func (c *Set) MatchRequest(domain string, descriptors [][]Entry) [][]*Limit {
	out := make([][]*Limit, len(descriptors))
	c.MatchRequestInto(out, domain, descriptors)
	return out
}

// MatchRequestInto is MatchRequest writing to out, which must have the
// length of descriptors (a caller's reused or stack buffer), so that a
// request without replaces allocates nothing.
func (c *Set) MatchRequestInto(out [][]*Limit, domain string, descriptors [][]Entry) {
	out = out[:len(descriptors)]
	replacing := false
	for i, d := range descriptors {
		out[i] = c.Match(domain, d)
		for _, l := range out[i] {
			replacing = replacing || len(l.Replaces) > 0
		}
	}
	if !replacing {
		return
	}
	replaced := map[string]bool{}
	for _, ls := range out {
		for _, l := range ls {
			for _, r := range l.Replaces {
				replaced[r] = true
			}
		}
	}
	isReplaced := func(l *Limit) bool { return l.explicitName && replaced[l.Name] }
	for i, ls := range out {
		if slices.ContainsFunc(ls, isReplaced) {
			out[i] = slices.DeleteFunc(slices.Clone(ls), isReplaced)
			if len(out[i]) == 0 {
				out[i] = nil
			}
		}
	}
}

// Empty reports whether c holds no rules: no domain and no policy (an
// empty config folder read with AnyFile, or a nil Set).
func (c *Set) Empty() bool {
	return c == nil || len(c.domains) == 0 && len(c.policies) == 0
}

// Files returns the files the config was loaded from, in load order.
func (c *Set) Files() []string {
	if c == nil {
		return nil
	}
	return slices.Clone(c.files)
}

// Domains returns the configured domains, sorted.
func (c *Set) Domains() []string {
	if c == nil {
		return nil
	}
	return slices.Sorted(maps.Keys(c.domains))
}

// Limits returns every configured limit, sorted by ID (for a debug dump).
func (c *Set) Limits() []*Limit {
	if c == nil {
		return nil
	}
	return slices.Clone(c.limits)
}

// Digest is a hash of the files' names and contents: two Configs with the
// same Digest were loaded from identical input.
func (c *Set) Digest() string {
	if c == nil {
		return ""
	}
	return c.digest
}
