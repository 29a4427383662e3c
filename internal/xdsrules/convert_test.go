package xdsrules

import (
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	rlconfv3 "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/internal/rules"
)

func anyOf(t *testing.T, m proto.Message) *anypb.Any {
	t.Helper()
	a, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func perHour(n uint32) *rlconfv3.RateLimitPolicy {
	return &rlconfv3.RateLimitPolicy{Unit: rlconfv3.RateLimitUnit_HOUR, RequestsPerUnit: n}
}

// sample is a resource using every field of the type.
func sample() *rlconfv3.RateLimitConfig {
	return &rlconfv3.RateLimitConfig{Name: "rl", Domain: "edge", Descriptors: []*rlconfv3.RateLimitDescriptor{
		{Key: "user", RateLimit: perHour(10), ShadowMode: true, DetailedMetric: true},
		{Key: "path", Value: `/a: "b"` + "\n#c", RateLimit: &rlconfv3.RateLimitPolicy{Unit: rlconfv3.RateLimitUnit_SECOND, RequestsPerUnit: 3, Name: "strict"}},
		{Key: "path", Value: "/free", RateLimit: &rlconfv3.RateLimitPolicy{Unlimited: true}},
		{Key: "ban", RateLimit: &rlconfv3.RateLimitPolicy{Unit: rlconfv3.RateLimitUnit_DAY}},
		{Key: "team", Descriptors: []*rlconfv3.RateLimitDescriptor{
			{Key: "user", RateLimit: &rlconfv3.RateLimitPolicy{Unit: rlconfv3.RateLimitUnit_MINUTE, RequestsPerUnit: 5,
				Replaces: []*rlconfv3.RateLimitReplace{{Name: "strict"}}}},
		}},
	}}
}

func TestConvertValid(t *testing.T) {
	parts, err := Convert([]*anypb.Any{anyOf(t, sample())}, "1", "")
	if err != nil {
		t.Fatal(err)
	}
	if len(parts) != 1 {
		t.Fatalf("%d parts, want 1", len(parts))
	}
	c := parts[0]
	if got := c.Files(); len(got) != 1 || got[0] != "xds:rl" {
		t.Errorf("Files() = %q, want [xds:rl]", got)
	}
	if got := c.Domains(); len(got) != 1 || got[0] != "edge" {
		t.Errorf("Domains() = %q, want [edge]", got)
	}
	one := func(entries ...rules.Entry) *rules.Limit {
		t.Helper()
		ls := c.Match("edge", entries)
		if len(ls) != 1 {
			t.Fatalf("Match(%v): %d limits, want 1", entries, len(ls))
		}
		return ls[0]
	}
	tests := []struct {
		name    string
		entries []rules.Entry
		check   func(*rules.Limit) bool
	}{
		{"user: 10/h fixed window, shadow, detailed", []rules.Entry{{Key: "user", Value: "x"}}, func(l *rules.Limit) bool {
			return l.Rate.Requests == 10 && l.Rate.Period == time.Hour && l.Rate.Algorithm == algorithms.FixedWindow && l.ShadowMode && l.DetailedMetric
		}},
		{"value with YAML syntax in it, named", []rules.Entry{{Key: "path", Value: `/a: "b"` + "\n#c"}}, func(l *rules.Limit) bool {
			return l.Rate.Requests == 3 && l.Rate.Period == time.Second && l.Name == "strict"
		}},
		{"unlimited", []rules.Entry{{Key: "path", Value: "/free"}}, func(l *rules.Limit) bool { return l.Unlimited }},
		{"requests_per_unit 0 denies all", []rules.Entry{{Key: "ban", Value: "b"}}, func(l *rules.Limit) bool {
			return l.DenyAll && l.Rate.Period == 24*time.Hour
		}},
		{"nested, replaces", []rules.Entry{{Key: "team", Value: "t"}, {Key: "user", Value: "u"}}, func(l *rules.Limit) bool {
			return l.Rate.Requests == 5 && l.Rate.Period == time.Minute && len(l.Replaces) == 1 && l.Replaces[0] == "strict"
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if l := one(tt.entries...); !tt.check(l) {
				t.Errorf("limit %+v", l)
			}
		})
	}
	if ls := c.Match("edge", []rules.Entry{{Key: "path", Value: "/other"}}); ls != nil {
		t.Errorf("path=/other matched %v, want nothing", ls)
	}
}

func TestConvertDefaultAlgorithm(t *testing.T) {
	parts, err := Convert([]*anypb.Any{anyOf(t, sample())}, "1", "token_bucket")
	if err != nil {
		t.Fatal(err)
	}
	if l := parts[0].Match("edge", []rules.Entry{{Key: "user", Value: "x"}}); len(l) != 1 || l[0].Rate.Algorithm != algorithms.TokenBucket {
		t.Errorf("limit %+v, want token_bucket", l)
	}
	if _, err := Convert([]*anypb.Any{anyOf(t, sample())}, "1", "leaky"); err == nil || !strings.Contains(err.Error(), "xds:rl: default_algorithm: default_algorithm: unknown algorithm") {
		t.Errorf("unknown algorithm: err %v", err)
	}
}

func TestConvertNoResources(t *testing.T) {
	parts, err := Convert(nil, "1", "")
	if err != nil || len(parts) != 0 {
		t.Errorf("Convert(nil) = %v, %v; want no parts", parts, err)
	}
}

// TestConvertErrors checks that every error names the resource and the
// field, the way a file's names file:line.
func TestConvertErrors(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*rlconfv3.RateLimitConfig)
		want   string
	}{
		{"no unit", func(c *rlconfv3.RateLimitConfig) { c.Descriptors[0].RateLimit.Unit = rlconfv3.RateLimitUnit_UNKNOWN },
			"xds:rl: descriptors[0].rate_limit: rate_limit needs a unit (or period), or unlimited: true"},
		{"unit out of the enum", func(c *rlconfv3.RateLimitConfig) { c.Descriptors[0].RateLimit.Unit = 9 },
			`xds:rl: descriptors[0].rate_limit.unit: invalid rate limit unit "9"`},
		{"empty key", func(c *rlconfv3.RateLimitConfig) { c.Descriptors[1].Key = "" },
			"xds:rl: descriptors[1].key: descriptor has an empty key"},
		{"empty domain", func(c *rlconfv3.RateLimitConfig) { c.Domain = "" },
			"xds:rl: domain: empty domain"},
		{"duplicate descriptor", func(c *rlconfv3.RateLimitConfig) { c.Descriptors[3].Key = "user" },
			`xds:rl: descriptors[3]: duplicate descriptor: key "user" is already defined at descriptors[0]`},
		{"replaces an unknown name", func(c *rlconfv3.RateLimitConfig) { c.Descriptors[1].RateLimit.Name = "" },
			`xds:rl: descriptors[4].descriptors[0].rate_limit.replaces[0].name: replaces names "strict", but no limit in domain "edge" has that name`},
		{"unlimited with requests", func(c *rlconfv3.RateLimitConfig) { c.Descriptors[2].RateLimit.RequestsPerUnit = 4 },
			"xds:rl: descriptors[2].rate_limit.requests_per_unit: requests_per_unit does not apply to an unlimited rate_limit"},
		{"unlimited with a unit", func(c *rlconfv3.RateLimitConfig) { c.Descriptors[2].RateLimit.Unit = rlconfv3.RateLimitUnit_SECOND },
			"xds:rl: descriptors[2].rate_limit.unit: should not specify rate limit unit when unlimited"},
		{"shadow_mode without a rate_limit", func(c *rlconfv3.RateLimitConfig) { c.Descriptors[4].ShadowMode = true },
			"xds:rl: descriptors[4].shadow_mode: shadow_mode applies to this descriptor's own rate_limit"},
		{"nested empty key", func(c *rlconfv3.RateLimitConfig) { c.Descriptors[4].Descriptors[0].Key = "" },
			"xds:rl: descriptors[4].descriptors[0].key: descriptor has an empty key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := sample()
			tt.mutate(c)
			_, err := Convert([]*anypb.Any{anyOf(t, c)}, "1", "")
			if err == nil {
				t.Fatalf("no error, want %q", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error:\n%v\nwant it to contain\n%s", err, tt.want)
			}
			if strings.Contains(err.Error(), "line") {
				t.Errorf("error mentions a line: %v", err)
			}
		})
	}
}

func TestConvertResourceErrors(t *testing.T) {
	other := sample()
	other.Name = "rl2"
	wrapped := anyOf(t, &discoveryv3.Resource{Name: "rl", Resource: anyOf(t, userOnly("w", "wrapped"))})
	tests := []struct {
		name string
		res  []*anypb.Any
		want string // "" when valid
	}{
		{"wrong type", []*anypb.Any{anyOf(t, &discoveryv3.DiscoveryRequest{})}, `xds:resources[0]: resource of type "type.googleapis.com/envoy.service.discovery.v3.DiscoveryRequest"`},
		{"two resources of one domain", []*anypb.Any{anyOf(t, sample()), anyOf(t, other)}, `xds:rl2: duplicate domain "edge": already defined by xds:rl`},
		{"two resources of one name", []*anypb.Any{anyOf(t, sample()), anyOf(t, sample())}, "xds:rl: two resources have this name"},
		{"no name: named by its domain", []*anypb.Any{anyOf(t, userOnly("", ""))}, `xds:domain "": domain: empty domain`},
		{"wrapped in a Resource", []*anypb.Any{wrapped}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Convert(tt.res, "1", "")
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("error %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("error %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

// userOnly is a resource of one rule: "user", 10 per hour.
func userOnly(name, domain string) *rlconfv3.RateLimitConfig {
	return &rlconfv3.RateLimitConfig{Name: name, Domain: domain, Descriptors: []*rlconfv3.RateLimitDescriptor{{Key: "user", RateLimit: perHour(10)}}}
}

// TestConvertNewerUnits: the units the resource type's newer revisions
// added (WEEK = 7, MONTH = 5, YEAR = 6) convert to week, month and year;
// a number no revision defines is refused, naming the field.
func TestConvertNewerUnits(t *testing.T) {
	tests := []struct {
		unit rlconfv3.RateLimitUnit
		want time.Duration
	}{
		{7, 7 * 24 * time.Hour},
		{5, 30 * 24 * time.Hour},
		{6, 365 * 24 * time.Hour},
		{rlconfv3.RateLimitUnit_DAY, 24 * time.Hour},
	}
	for _, tt := range tests {
		rc := &rlconfv3.RateLimitConfig{Name: "rl", Domain: "edge", Descriptors: []*rlconfv3.RateLimitDescriptor{
			{Key: "user", RateLimit: &rlconfv3.RateLimitPolicy{Unit: tt.unit, RequestsPerUnit: 3}},
		}}
		parts, err := Convert([]*anypb.Any{anyOf(t, rc)}, "1", "")
		if err != nil {
			t.Errorf("unit %d: %v", tt.unit, err)
			continue
		}
		ls := parts[0].Match("edge", []rules.Entry{{Key: "user", Value: "x"}})
		if len(ls) != 1 || ls[0].Rate.Period != tt.want || ls[0].Rate.Requests != 3 {
			t.Errorf("unit %d: limits %+v, want 3 per %v", tt.unit, ls, tt.want)
		}
	}
	rc := &rlconfv3.RateLimitConfig{Name: "rl", Domain: "edge", Descriptors: []*rlconfv3.RateLimitDescriptor{
		{Key: "user", RateLimit: &rlconfv3.RateLimitPolicy{Unit: 8, RequestsPerUnit: 3}},
	}}
	if _, err := Convert([]*anypb.Any{anyOf(t, rc)}, "1", ""); err == nil || !strings.Contains(err.Error(), `descriptors[0].rate_limit.unit: invalid rate limit unit "8"`) {
		t.Errorf("unit 8: err %v", err)
	}
}

// nested is a resource whose descriptors nest depth levels, one per level.
func nested(depth int) *rlconfv3.RateLimitConfig {
	var ds []*rlconfv3.RateLimitDescriptor
	for i := depth; i > 0; i-- {
		ds = []*rlconfv3.RateLimitDescriptor{{Key: "k", Value: strconv.Itoa(i), Descriptors: ds}}
	}
	ds[0].RateLimit = perHour(1)
	return &rlconfv3.RateLimitConfig{Name: "deep", Domain: "d", Descriptors: ds}
}

// TestConvertDeepBounded: nesting is checked while converting, so a
// resource thousands of levels deep is refused, naming the level, for
// memory in proportion to the levels converted (not their square); 32
// levels still convert.
func TestConvertDeepBounded(t *testing.T) {
	if _, err := Convert([]*anypb.Any{anyOf(t, nested(32))}, "1", ""); err != nil {
		t.Fatalf("32 levels: %v", err)
	}
	want := "xds:deep: descriptors[0]" + strings.Repeat(".descriptors[0]", 31) + ": descriptors nest deeper than 32 levels"
	for _, depth := range []int{33, 3000, 4000} {
		res := []*anypb.Any{anyOf(t, nested(depth))}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		_, err := Convert(res, "1", "")
		runtime.ReadMemStats(&after)
		if err == nil || err.Error() != want {
			t.Errorf("%d levels: err %v, want %q", depth, err, want)
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 4<<20 {
			t.Errorf("%d levels: %d bytes allocated converting, want under 4 MiB", depth, alloc)
		}
	}
}

// TestConvertSizeBounded: a resource whose rules document passes the
// size bound is refused while converting, before it is parsed.
func TestConvertSizeBounded(t *testing.T) {
	rc := &rlconfv3.RateLimitConfig{Name: "big", Domain: "d", Descriptors: []*rlconfv3.RateLimitDescriptor{
		{Key: "k", Value: strings.Repeat("v", maxDocBytes), RateLimit: perHour(1)},
		{Key: "after"},
	}}
	_, err := convertOne("big", "1", rc, "")
	if err == nil || err.Error() != "xds:big: descriptors[0]: resource too large: its rules pass 16 MiB" {
		t.Errorf("err %v", err)
	}
}

// TestConvertStopsAtBound: once a bound is passed nothing more is
// written or walked: a resource 4,000 levels deep costs what one 40 deep
// does, and the document ends at the line that passed the size bound.
func TestConvertStopsAtBound(t *testing.T) {
	deep, shallow := nested(4000), nested(40)
	allocs := func(rc *rlconfv3.RateLimitConfig) float64 {
		return testing.AllocsPerRun(5, func() { _, _ = convertOne("deep", "1", rc, "") })
	}
	if a, b := allocs(deep), allocs(shallow); a > b+100 {
		t.Errorf("4000 levels: %v allocations, 40 levels: %v; want about the same", a, b)
	}
	var d doc
	d.put(0, false, nil, "domain", quoted("d"))
	d.descriptors(0, 1, nil, []*rlconfv3.RateLimitDescriptor{
		{Key: "k", Value: strings.Repeat("v", maxDocBytes), RateLimit: perHour(1)},
		{Key: "after"},
	})
	if len(d.lines) != 4 || d.err == "" { // domain, descriptors, key, value
		t.Errorf("%d lines after the size bound (err %q), want 4", len(d.lines), d.err)
	}
}

// TestWhereTopLevel: an error at a top-level key names the field.
func TestWhereTopLevel(t *testing.T) {
	var d doc
	d.put(0, false, nil, "domain", quoted("d"))
	if got := d.where(1, 1); got != "domain" {
		t.Errorf("where(1, 1) = %q, want domain", got)
	}
	if got := d.where(2, 1); got != "" {
		t.Errorf("where past the end = %q", got)
	}
}
