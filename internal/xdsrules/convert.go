package xdsrules

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	rlconfv3 "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/floodgate/floodgate/internal/rules"
)

// typeURL is the xDS resource type floodgate subscribes to, as
// envoyproxy/ratelimit does.
const typeURL = "type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig"

// resourceWrapperURL is the type of a resource wrapped in a
// discovery Resource, which some management servers send.
const resourceWrapperURL = "type.googleapis.com/envoy.service.discovery.v3.Resource"

// sourcePrefix starts the source name of every xDS resource in a Config's
// Files and in error messages: "xds:" and the resource's name.
const sourcePrefix = "xds:"

// Convert turns the resources of one xDS response (every domain the
// management server serves) into validated Configs, one per resource, by
// way of the YAML document each stands for, so they get the files'
// validation; two resources of one domain are an error. Errors name the
// resource ("xds:NAME") and the field ("descriptors[0].rate_limit.unit").
// defaultAlgorithm, when not empty, is every limit's algorithm (the
// resource type has no field for it).
func Convert(resources []*anypb.Any, version, defaultAlgorithm string) ([]*rules.Set, error) {
	var parts []*rules.Set
	var errs rules.ErrorList
	seen := map[string]bool{}
	for i, a := range resources {
		rc, err := unpack(a)
		if err != nil {
			errs = append(errs, &rules.Error{File: fmt.Sprintf("%sresources[%d]", sourcePrefix, i), Msg: err.Error()})
			continue
		}
		name := cmp.Or(rc.GetName(), "domain "+strconv.Quote(rc.GetDomain())) // the reference does not require a name
		if seen[name] {
			errs = append(errs, &rules.Error{File: sourcePrefix + name, Msg: "two resources have this name"})
			continue
		}
		seen[name] = true
		cfg, err := convertOne(name, version, rc, defaultAlgorithm)
		if err != nil {
			if l, ok := errors.AsType[rules.ErrorList](err); ok {
				errs = append(errs, l...)
				continue
			}
			return nil, err
		}
		parts = append(parts, cfg)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	if _, err := rules.Merge(parts...); err != nil {
		return nil, err
	}
	return parts, nil
}

// unpack reads one RateLimitConfig from an Any, unwrapping a discovery
// Resource.
func unpack(a *anypb.Any) (*rlconfv3.RateLimitConfig, error) {
	if a.GetTypeUrl() == resourceWrapperURL {
		var r discoveryv3.Resource
		if err := a.UnmarshalTo(&r); err != nil {
			return nil, fmt.Errorf("undecodable Resource wrapper: %w", err)
		}
		a = r.GetResource()
	}
	if a.GetTypeUrl() != typeURL {
		return nil, fmt.Errorf("resource of type %q, want %s", a.GetTypeUrl(), typeURL)
	}
	var rc rlconfv3.RateLimitConfig
	if err := a.UnmarshalTo(&rc); err != nil {
		return nil, fmt.Errorf("undecodable RateLimitConfig: %w", err)
	}
	return &rc, nil
}

// Bounds checked while a resource is converted, before any document is
// parsed, so a deep or huge resource costs memory in proportion to what
// was written, not to its depth squared.
const (
	maxDepth    = 32
	maxDocBytes = 16 << 20
)

// convertOne converts one resource, named name in errors, to a Config.
func convertOne(name, version string, rc *rlconfv3.RateLimitConfig, defaultAlgorithm string) (*rules.Set, error) {
	source := sourcePrefix + name
	var d doc
	d.put(0, false, nil, "domain", quoted(rc.GetDomain()))
	if defaultAlgorithm != "" {
		d.put(0, false, nil, "default_algorithm", quoted(defaultAlgorithm))
	}
	d.descriptors(0, 1, nil, rc.GetDescriptors())
	if d.err != "" {
		// A bound passed: the document is incomplete, and not parsed.
		return nil, rules.ErrorList{{File: source, Msg: d.err}}
	}
	cfg, err := rules.ParseXDS(source, name, version, []byte(d.b.String()))
	if err != nil {
		return nil, d.relabel(source, err)
	}
	return cfg, nil
}

// doc writes the YAML document a resource stands for, one field a line,
// and remembers which field each line holds.
type doc struct {
	b     strings.Builder
	lines []line // lines[i] is line i+1
	// err, once a bound is passed, names where and which; nothing more
	// is written.
	err string
}

// fail records the first bound passed, at object.
func (d *doc) fail(object *path, format string, args ...any) {
	if d.err != "" {
		return
	}
	d.err = fmt.Sprintf(format, args...)
	if at := object.String(); at != "" {
		d.err = at + ": " + d.err
	}
}

// path is where an object sits in the resource: "descriptors[3]" below
// its parent; nil is the top. Lines share their object's path, so the
// memory a line costs does not grow with its depth.
type path struct {
	parent *path
	name   string
	index  int // -1: not a list item
}

// child is the path of field name of p (a list item when index >= 0).
func (p *path) child(name string, index int) *path { return &path{parent: p, name: name, index: index} }

// String is the path as errors name it: "descriptors[0].rate_limit".
func (p *path) String() string {
	if p == nil {
		return ""
	}
	s := p.name
	if p.index >= 0 {
		s += "[" + strconv.Itoa(p.index) + "]"
	}
	return join(p.parent.String(), s)
}

// line is what one line of the document holds.
type line struct {
	object *path  // the object holding the field
	key    string // the field's name
	keyCol int    // 1-based column of the field's key
}

// field is the path of the field l holds.
func (l line) field() string { return join(l.object.String(), l.key) }

// join is path + "." + field, or field at the top.
func join(path, field string) string {
	if path == "" {
		return field
	}
	return path + "." + field
}

// put writes one line: indent, "- " when it opens a list item, the key,
// and v as is ("" when a nested object or list follows). Nothing is
// written once a bound is passed.
func (d *doc) put(indent int, item bool, object *path, k, v string) {
	if d.b.Len() > maxDocBytes {
		d.fail(object, "resource too large: its rules pass %d MiB", maxDocBytes>>20)
	}
	if d.err != "" {
		return
	}
	col := indent + 1
	d.b.WriteString(strings.Repeat(" ", indent))
	if item {
		d.b.WriteString("- ")
		col += 2
	}
	d.lines = append(d.lines, line{object: object, key: k, keyCol: col})
	d.b.WriteString(k)
	d.b.WriteByte(':')
	if v != "" {
		d.b.WriteByte(' ')
		d.b.WriteString(v)
	}
	d.b.WriteByte('\n')
}

// quoted is s as a JSON string, which YAML reads verbatim.
func quoted(s string) string {
	q, _ := json.Marshal(s)
	return string(q)
}

// descriptors writes the list ds of object, at depth (1 for the domain's
// own list).
func (d *doc) descriptors(indent, depth int, object *path, ds []*rlconfv3.RateLimitDescriptor) {
	if len(ds) == 0 {
		return
	}
	if depth > maxDepth {
		d.fail(object, "descriptors nest deeper than %d levels", maxDepth)
	}
	d.put(indent, false, object, "descriptors", "")
	for i, desc := range ds {
		if d.err != "" {
			return
		}
		at := object.child("descriptors", i)
		// The key always comes first: it opens the item, and the parser's
		// errors about the whole descriptor point at it.
		d.put(indent+2, true, at, "key", quoted(desc.GetKey()))
		in := indent + 4
		if desc.GetValue() != "" {
			d.put(in, false, at, "value", quoted(desc.GetValue()))
		}
		if rl := desc.GetRateLimit(); rl != nil {
			d.rateLimit(in, at, rl)
		}
		if desc.GetShadowMode() {
			d.put(in, false, at, "shadow_mode", "true")
		}
		if desc.GetDetailedMetric() {
			d.put(in, false, at, "detailed_metric", "true")
		}
		if desc.GetQuotaMode() {
			d.put(in, false, at, "quota_mode", "true")
		}
		if m := desc.GetMetadata(); len(m.GetFields()) > 0 {
			// JSON is YAML: the parser reads it back into the same Struct.
			if j, err := protojson.Marshal(m); err == nil {
				d.put(in, false, at, "metadata", string(j))
			}
		}
		d.descriptors(in, depth+1, at, desc.GetDescriptors())
	}
}

func (d *doc) rateLimit(indent int, object *path, rl *rlconfv3.RateLimitPolicy) {
	at := object.child("rate_limit", -1)
	d.put(indent, false, object, "rate_limit", "")
	in := indent + 2
	// The parser points at the whole object by its first field's key;
	// where tells the two apart by the column.
	if rl.GetUnlimited() {
		d.put(in, false, at, "unlimited", "true")
	}
	if u := rl.GetUnit(); u != rlconfv3.RateLimitUnit_UNKNOWN {
		// A number the enum does not name stays a number, which the parser refuses.
		d.put(in, false, at, "unit", quoted(strings.ToLower(u.String())))
	}
	if n := rl.GetRequestsPerUnit(); n != 0 || !rl.GetUnlimited() {
		// proto3 cannot tell 0 from unset: 0 denies every request, as in
		// a file (and in the reference).
		d.put(in, false, at, "requests_per_unit", strconv.FormatUint(uint64(n), 10))
	}
	if rl.GetName() != "" {
		d.put(in, false, at, "name", quoted(rl.GetName()))
	}
	if rs := rl.GetReplaces(); len(rs) > 0 {
		d.put(in, false, at, "replaces", "")
		for i, r := range rs {
			d.put(in+2, true, at.child("replaces", i), "name", quoted(r.GetName()))
		}
	}
}

// atLine finds "line N, column M" in the parser's messages (a duplicate's
// first definition).
var atLine = regexp.MustCompile(`(?:at )?line (\d+), column (\d+)`)

// relabel rewrites the parser's errors about the document into errors
// about the resource: the field a line holds instead of the line.
func (d *doc) relabel(source string, err error) error {
	l, ok := errors.AsType[rules.ErrorList](err)
	if !ok {
		return err
	}
	out := make(rules.ErrorList, 0, len(l))
	for _, e := range l {
		msg := atLine.ReplaceAllStringFunc(e.Msg, func(m string) string {
			sub := atLine.FindStringSubmatch(m)
			ln, _ := strconv.Atoi(sub[1])
			col, _ := strconv.Atoi(sub[2])
			return "at " + d.where(ln, col)
		})
		if w := d.where(e.Line, e.Column); w != "" {
			msg = w + ": " + msg
		}
		out = append(out, &rules.Error{File: source, Msg: msg})
	}
	return out
}

// where names what is at line ln, column col of the document: the field
// when col is past the field's key (its value), else the object holding
// it (the parser points at an object by its first key).
func (d *doc) where(ln, col int) string {
	if ln < 1 || ln > len(d.lines) {
		return ""
	}
	l := d.lines[ln-1]
	if col > l.keyCol || l.object == nil {
		return l.field()
	}
	return l.object.String()
}
