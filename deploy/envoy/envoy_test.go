// Package envoy_test checks the example deployment in this folder:
// envoy.yaml is valid Envoy v3 bootstrap config, and ratelimit.yaml is a
// valid floodgate config with a limit for every descriptor envoy.yaml's
// rate-limit actions send.
package envoy_test

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ratelimit/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/reflect/protopath"
	"google.golang.org/protobuf/reflect/protorange"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/floodgate/floodgate/internal/rules"
)

// loadBootstrap parses envoy.yaml as Envoy does: YAML to JSON to the v3
// Bootstrap proto, rejecting unknown fields and unresolvable typed_config
// types.
func loadBootstrap(t *testing.T) *bootstrapv3.Bootstrap {
	t.Helper()
	data, err := os.ReadFile("envoy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatalf("envoy.yaml: %v", err)
	}
	js, err := json.Marshal(doc)
	if err != nil {
		t.Fatalf("envoy.yaml as JSON: %v", err)
	}
	var b bootstrapv3.Bootstrap
	if err := protojson.Unmarshal(js, &b); err != nil {
		t.Fatalf("envoy.yaml is not a v3 Bootstrap: %v", err)
	}
	return &b
}

// validator is what protoc-gen-validate generates on Envoy's messages.
type validator interface{ ValidateAll() error }

// TestEnvoyBootstrapValid: the bootstrap and every message packed in an
// Any (the filters' typed_config, the cluster protocol options) pass
// Envoy's own validation rules.
func TestEnvoyBootstrapValid(t *testing.T) {
	b := loadBootstrap(t)
	if err := b.ValidateAll(); err != nil {
		t.Fatalf("Bootstrap.ValidateAll: %v", err)
	}
	// ValidateAll does not look inside Any; unpack each one (protorange
	// walks into Anys too, so nested ones are found) and validate it.
	var types []string
	err := protorange.Range(b.ProtoReflect(), func(v protopath.Values) error {
		m, ok := v.Index(-1).Value.Interface().(protoreflect.Message)
		if !ok || m.Descriptor().FullName() != "google.protobuf.Any" {
			return nil
		}
		a, ok := m.Interface().(*anypb.Any)
		if !ok {
			return fmt.Errorf("%s: an Any of Go type %T", v.Path, m.Interface())
		}
		inner, err := a.UnmarshalNew()
		if err != nil {
			return fmt.Errorf("%s: %w", v.Path, err)
		}
		types = append(types, a.TypeUrl)
		vi, ok := inner.(validator)
		if !ok {
			return fmt.Errorf("%s: %s has no validation rules", v.Path, a.TypeUrl)
		}
		if err := vi.ValidateAll(); err != nil {
			return fmt.Errorf("%s (%s): %w", v.Path, a.TypeUrl, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
		"type.googleapis.com/envoy.extensions.filters.http.ratelimit.v3.RateLimit",
		"type.googleapis.com/envoy.extensions.filters.http.router.v3.Router",
		"type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
	} {
		if !contains(types, want) {
			t.Errorf("no typed_config of %s was resolved (found %v)", want, types)
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// example is what the tests need from envoy.yaml.
type example struct {
	filter *ratelimitv3.RateLimit
	routes []*routev3.Route
}

// parseExample finds the rate-limit filter and the routes in envoy.yaml.
func parseExample(t *testing.T) example {
	t.Helper()
	b := loadBootstrap(t)
	var ex example
	for _, l := range b.GetStaticResources().GetListeners() {
		for _, fc := range l.GetFilterChains() {
			for _, f := range fc.GetFilters() {
				hcm := &hcmv3.HttpConnectionManager{}
				if f.GetTypedConfig().MessageIs(hcm) {
					if err := f.GetTypedConfig().UnmarshalTo(hcm); err != nil {
						t.Fatal(err)
					}
					for _, vh := range hcm.GetRouteConfig().GetVirtualHosts() {
						ex.routes = append(ex.routes, vh.GetRoutes()...)
					}
					var names []string
					for _, hf := range hcm.GetHttpFilters() {
						names = append(names, hf.GetName())
						rl := &ratelimitv3.RateLimit{}
						if hf.GetTypedConfig().MessageIs(rl) {
							if err := hf.GetTypedConfig().UnmarshalTo(rl); err != nil {
								t.Fatal(err)
							}
							ex.filter = rl
						}
					}
					if len(names) == 0 || names[len(names)-1] != "envoy.filters.http.router" {
						t.Errorf("http_filters %v: the router must come last", names)
					}
				}
			}
		}
	}
	if ex.filter == nil || len(ex.routes) == 0 {
		t.Fatalf("envoy.yaml has no envoy.filters.http.ratelimit filter with routes")
	}
	return ex
}

// TestEnvoyRateLimitFilter: the filter talks v3 gRPC to the floodgate
// cluster (HTTP/2), fails open, answers 429 as RESOURCE_EXHAUSTED to gRPC
// clients, and leaves the X-RateLimit-* headers to floodgate.
func TestEnvoyRateLimitFilter(t *testing.T) {
	ex := parseExample(t)
	f := ex.filter
	if f.GetDomain() != "edge" || f.GetFailureModeDeny() || f.GetTimeout().AsDuration() <= 0 || !f.GetRateLimitedAsResourceExhausted() {
		t.Errorf("filter: domain %q, failure_mode_deny %v, timeout %v, rate_limited_as_resource_exhausted %v; want edge, false, set, true",
			f.GetDomain(), f.GetFailureModeDeny(), f.GetTimeout(), f.GetRateLimitedAsResourceExhausted())
	}
	// floodgate writes the draft-03 headers itself (--response-headers,
	// on by default); Envoy's own would duplicate them.
	if f.GetEnableXRatelimitHeaders() != ratelimitv3.RateLimit_OFF {
		t.Errorf("enable_x_ratelimit_headers is %v: with floodgate's headers on, clients get every X-RateLimit-* twice", f.GetEnableXRatelimitHeaders())
	}
	svc := f.GetRateLimitService()
	if svc.GetTransportApiVersion().String() != "V3" || svc.GetGrpcService().GetEnvoyGrpc().GetClusterName() != "floodgate" {
		t.Errorf("rate_limit_service: %v; want V3 over envoy_grpc to cluster floodgate", svc)
	}
	b := loadBootstrap(t)
	found := false
	for _, c := range b.GetStaticResources().GetClusters() {
		if c.GetName() != "floodgate" {
			continue
		}
		found = true
		js, err := protojson.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(js), "http2ProtocolOptions") || !strings.Contains(string(js), `"portValue":8081`) {
			t.Errorf("cluster floodgate must speak HTTP/2 to port 8081: %s", js)
		}
	}
	if !found {
		t.Error("no cluster named floodgate")
	}
}

// samples are the request values the descriptor check feeds the actions.
var samples = map[string][]string{
	"x-api-key": {"k-123"},
	"x-plan":    {"free", "basic", "pro", "enterprise"},
}

// TestRatelimitYAMLMatchesActions: ratelimit.yaml loads, is the filter's
// domain, and every descriptor the routes' actions can send (with sample
// header values) matches at least one limit. An action of a kind this test
// does not know fails it, so new actions get checked too.
func TestRatelimitYAMLMatchesActions(t *testing.T) {
	ex := parseExample(t)
	cfg, err := rules.Load("ratelimit.yaml", rules.Options{})
	if err != nil {
		t.Fatalf("config.Load(ratelimit.yaml): %v", err)
	}
	if !cfg.HasDomain(ex.filter.GetDomain()) {
		t.Fatalf("ratelimit.yaml has domains %v, the filter sends %q", cfg.Domains(), ex.filter.GetDomain())
	}
	kinds := map[string]bool{}
	checked := 0
	for _, r := range ex.routes {
		for i, rl := range r.GetRoute().GetRateLimits() {
			where := fmt.Sprintf("route %v, rate_limits[%d]", r.GetMatch(), i)
			for _, entries := range descriptorsOf(t, where, r.GetMatch(), rl.GetActions(), kinds) {
				if ls := cfg.Match(ex.filter.GetDomain(), entries); len(ls) == 0 {
					t.Errorf("%s: descriptor %v matches no limit in ratelimit.yaml", where, entries)
				}
				checked++
			}
		}
	}
	for _, k := range []string{"remote_address", "request_headers x-api-key", "request_headers x-plan", "request_headers :path", "generic_key"} {
		if !kinds[k] {
			t.Errorf("envoy.yaml has no %s action", k)
		}
	}
	t.Logf("%d descriptors checked", checked)
}

// descriptorsOf returns the descriptors one rate_limits entry sends, one
// per combination of sample values, as Envoy builds them: one entry per
// action, in order.
func descriptorsOf(t *testing.T, where string, match *routev3.RouteMatch, actions []*routev3.RateLimit_Action, kinds map[string]bool) [][]rules.Entry {
	t.Helper()
	out := [][]rules.Entry{nil}
	for _, a := range actions {
		var key string
		var values []string
		switch {
		case a.GetRemoteAddress() != nil:
			kinds["remote_address"] = true
			key, values = "remote_address", []string{"192.0.2.1", "127.0.0.1"}
		case a.GetGenericKey() != nil:
			kinds["generic_key"] = true
			key, values = a.GetGenericKey().GetDescriptorKey(), []string{a.GetGenericKey().GetDescriptorValue()}
			if key == "" {
				key = "generic_key"
			}
		case a.GetRequestHeaders() != nil:
			h := a.GetRequestHeaders()
			kinds["request_headers "+h.GetHeaderName()] = true
			key = h.GetDescriptorKey()
			switch {
			case h.GetHeaderName() == ":path":
				p := match.GetPrefix() + match.GetPath()
				values = []string{p, p + "/2026-01?format=csv"}
			default:
				values = samples[h.GetHeaderName()]
			}
			if len(values) == 0 {
				t.Fatalf("%s: no sample values for header %q", where, h.GetHeaderName())
			}
		default:
			t.Fatalf("%s: action %v is not one this test knows how to turn into a descriptor entry", where, a)
		}
		var next [][]rules.Entry
		for _, d := range out {
			for _, v := range values {
				next = append(next, append(append([]rules.Entry(nil), d...), rules.Entry{Key: key, Value: v}))
			}
		}
		out = next
	}
	return out
}

// TestGuideYAML: every yaml block of docs/envoy.md is either a floodgate
// config that loads (it has a domain) or an excerpt of envoy.yaml (its
// lines appear there in order, with the same relative indentation).
func TestGuideYAML(t *testing.T) {
	guide, err := os.ReadFile("../../docs/envoy.md")
	if err != nil {
		t.Fatal(err)
	}
	envoyYAML, err := os.ReadFile("envoy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	blocks := fencedBlocks(string(guide), "yaml")
	if len(blocks) == 0 {
		t.Fatal("docs/envoy.md has no yaml blocks")
	}
	for i, b := range blocks {
		if strings.HasPrefix(b, "domain:") {
			if _, err := rules.Parse(fmt.Sprintf("docs/envoy.md block %d", i), []byte(b)); err != nil {
				t.Errorf("yaml block %d does not load: %v", i, err)
			}
			continue
		}
		if !isExcerpt(strings.Split(strings.TrimRight(b, "\n"), "\n"), strings.Split(string(envoyYAML), "\n")) {
			t.Errorf("yaml block %d is neither a floodgate config nor an excerpt of envoy.yaml:\n%s", i, b)
		}
	}
}

// fencedBlocks returns the contents of the ```lang blocks of a Markdown
// text.
func fencedBlocks(md, lang string) []string {
	var out []string
	var cur *strings.Builder
	for _, line := range strings.Split(md, "\n") {
		switch {
		case cur == nil && line == "```"+lang:
			cur = &strings.Builder{}
		case cur != nil && line == "```":
			out = append(out, cur.String())
			cur = nil
		case cur != nil:
			cur.WriteString(line + "\n")
		}
	}
	return out
}

// isExcerpt reports whether the lines of block appear consecutively in
// file, all shifted right by the same indentation.
func isExcerpt(block, file []string) bool {
	for start := range file {
		indent, ok := strings.CutSuffix(file[start], block[0])
		if !ok || strings.TrimSpace(indent) != "" || start+len(block) > len(file) {
			continue
		}
		match := true
		for j, l := range block {
			if file[start+j] != indent+l {
				match = false
				break
			}
		}
		if match {
			return true
		}
	}
	return false
}
