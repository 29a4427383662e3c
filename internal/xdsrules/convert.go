package xdsrules

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	rlconfv3 "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/floodgate/floodgate/internal/rules"
)

// TypeURL is the xDS resource type floodgate subscribes to, as
// envoyproxy/ratelimit does.
const TypeURL = "type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig"

// resourceWrapperURL is the type of a resource wrapped in a
// discovery Resource, which some management servers send.
const resourceWrapperURL = "type.googleapis.com/envoy.service.discovery.v3.Resource"

// SourcePrefix starts the source name of every xDS resource in a Config's
// Files and in error messages: "xds:" and the resource's name.
const SourcePrefix = "xds:"

// Convert turns the resources of one xDS response (the whole state of the
// RateLimitConfig type: every domain the management server serves) into
// validated Configs, one per resource, by the same validation the YAML
// files get; two resources of one domain are an error. Merge them with
// rules.Merge (with the files' Config, say). A
// resource converts to the YAML document it stands for; errors name the
// resource ("xds:NAME") and the field ("descriptors[0].rate_limit.unit"),
// never a line of that internal document. defaultAlgorithm, when not
// empty, is every limit's algorithm (the resource type has no field for
// it). No resources give no Configs: no xDS domains.
func Convert(resources []*anypb.Any, version, defaultAlgorithm string) ([]*rules.Set, error) {
	var parts []*rules.Set
	var errs rules.ErrorList
	seen := map[string]bool{}
	for i, a := range resources {
		rc, err := unpack(a)
		if err != nil {
			errs = append(errs, &rules.Error{File: fmt.Sprintf("%sresources[%d]", SourcePrefix, i), Msg: err.Error()})
			continue
		}
		name := rc.GetName()
		if name == "" {
			name = "domain " + strconv.Quote(rc.GetDomain()) // the reference does not require a name
		}
		if seen[name] {
			errs = append(errs, &rules.Error{File: SourcePrefix + name, Msg: "two resources have this name"})
			continue
		}
		seen[name] = true
		cfg, err := ConvertOne(name, version, rc, defaultAlgorithm)
		if err != nil {
			var l rules.ErrorList
			if errors.As(err, &l) {
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
	if a.GetTypeUrl() != TypeURL {
		return nil, fmt.Errorf("resource of type %q, want %s", a.GetTypeUrl(), TypeURL)
	}
	var rc rlconfv3.RateLimitConfig
	if err := a.UnmarshalTo(&rc); err != nil {
		return nil, fmt.Errorf("undecodable RateLimitConfig: %w", err)
	}
	return &rc, nil
}

// ConvertOne converts one resource, named name in errors, to a Config.
func ConvertOne(name, version string, rc *rlconfv3.RateLimitConfig, defaultAlgorithm string) (*rules.Set, error) {
	var d doc
	d.write(0, "", "domain", rc.GetDomain())
	if defaultAlgorithm != "" {
		d.write(0, "", "default_algorithm", defaultAlgorithm)
	}
	d.descriptors(0, "", rc.GetDescriptors())
	source := SourcePrefix + name
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
}

// line is what one line of the document holds.
type line struct {
	object string // the object's path ("descriptors[0].rate_limit"; "" at the top)
	field  string // the field's path
	keyCol int    // 1-based column of the field's key
}

// join is path + "." + field, or field at the top.
func join(path, field string) string {
	if path == "" {
		return field
	}
	return path + "." + field
}

// key starts a line: indent, then "- " when the line opens a list item,
// then the key. It returns the key's column.
func (d *doc) key(indent int, item bool, k string) int {
	d.b.WriteString(strings.Repeat(" ", indent))
	col := indent + 1
	if item {
		d.b.WriteString("- ")
		col += 2
	}
	d.b.WriteString(k)
	d.b.WriteString(":")
	return col
}

// write writes "key: value" (a string, as a JSON string, which YAML reads
// verbatim).
func (d *doc) write(indent int, object, k, v string) {
	d.writeItem(indent, false, object, k, v)
}

func (d *doc) writeItem(indent int, item bool, object, k, v string) {
	col := d.key(indent, item, k)
	q, _ := json.Marshal(v)
	d.b.WriteString(" ")
	d.b.Write(q)
	d.b.WriteString("\n")
	d.lines = append(d.lines, line{object: object, field: join(object, k), keyCol: col})
}

// raw writes "key: v" with v written as is (numbers, booleans).
func (d *doc) raw(indent int, item bool, object, k, v string) {
	col := d.key(indent, item, k)
	d.b.WriteString(" ")
	d.b.WriteString(v)
	d.b.WriteString("\n")
	d.lines = append(d.lines, line{object: object, field: join(object, k), keyCol: col})
}

// open writes "key:" opening a nested object or list.
func (d *doc) open(indent int, object, k string) {
	col := d.key(indent, false, k)
	d.b.WriteString("\n")
	d.lines = append(d.lines, line{object: object, field: join(object, k), keyCol: col})
}

func (d *doc) descriptors(indent int, object string, ds []*rlconfv3.RateLimitDescriptor) {
	if len(ds) == 0 {
		return
	}
	list := join(object, "descriptors")
	d.open(indent, object, "descriptors")
	for i, desc := range ds {
		path := fmt.Sprintf("%s[%d]", list, i)
		// The key always comes first: it opens the item, and the parser's
		// errors about the whole descriptor point at it.
		d.writeItem(indent+2, true, path, "key", desc.GetKey())
		in := indent + 4
		if desc.GetValue() != "" {
			d.write(in, path, "value", desc.GetValue())
		}
		if rl := desc.GetRateLimit(); rl != nil {
			d.rateLimit(in, path, rl)
		}
		if desc.GetShadowMode() {
			d.raw(in, false, path, "shadow_mode", "true")
		}
		if desc.GetDetailedMetric() {
			d.raw(in, false, path, "detailed_metric", "true")
		}
		d.descriptors(in, path, desc.GetDescriptors())
	}
}

func (d *doc) rateLimit(indent int, object string, rl *rlconfv3.RateLimitPolicy) {
	path := join(object, "rate_limit")
	d.open(indent, object, "rate_limit")
	in := indent + 2
	// The parser points at the whole object by its first field's key;
	// where tells the two apart by the column.
	if rl.GetUnlimited() {
		d.raw(in, false, path, "unlimited", "true")
	}
	if u := rl.GetUnit(); u != rlconfv3.RateLimitUnit_UNKNOWN {
		d.write(in, path, "unit", unitName(u))
	}
	if n := rl.GetRequestsPerUnit(); n != 0 || !rl.GetUnlimited() {
		// proto3 cannot tell 0 from unset: 0 denies every request, as in
		// a file (and in the reference).
		d.raw(in, false, path, "requests_per_unit", strconv.FormatUint(uint64(n), 10))
	}
	if rl.GetName() != "" {
		d.write(in, path, "name", rl.GetName())
	}
	if rs := rl.GetReplaces(); len(rs) > 0 {
		list := join(path, "replaces")
		d.open(in, path, "replaces")
		for i, r := range rs {
			d.writeItem(in+2, true, fmt.Sprintf("%s[%d]", list, i), "name", r.GetName())
		}
	}
}

// Units of the resource type's newer revisions (go-control-plane's
// ratelimit v0.1.1, envoyproxy/ratelimit's config.proto), which the
// generated code floodgate builds with does not name; proto3 enums are
// open, so they arrive as these numbers.
const (
	unitMonth rlconfv3.RateLimitUnit = 5
	unitYear  rlconfv3.RateLimitUnit = 6
	unitWeek  rlconfv3.RateLimitUnit = 7
)

// unitName is the config's name of unit u ("second" … "year"); a number
// no revision defines stays a number, which the parser refuses.
func unitName(u rlconfv3.RateLimitUnit) string {
	switch u {
	case unitWeek:
		return "week"
	case unitMonth:
		return "month"
	case unitYear:
		return "year"
	}
	return strings.ToLower(u.String())
}

// atLine finds "line N, column M" in the parser's messages (a duplicate's
// first definition).
var atLine = regexp.MustCompile(`(?:at )?line (\d+), column (\d+)`)

// relabel rewrites the parser's errors about the document into errors
// about the resource: the field a line holds instead of the line.
func (d *doc) relabel(source string, err error) error {
	var l rules.ErrorList
	if !errors.As(err, &l) {
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
	if col > l.keyCol || l.object == "" {
		return l.field
	}
	return l.object
}
