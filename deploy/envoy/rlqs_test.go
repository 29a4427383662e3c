package envoy_test

import (
	"encoding/json"
	"fmt"
	"os"
	"testing"

	xdsmatcher "github.com/cncf/xds/go/xds/type/matcher/v3"
	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	rlqfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rate_limit_quota/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3" // HttpRequestHeaderMatchInput
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/reflect/protopath"
	"google.golang.org/protobuf/reflect/protorange"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/floodgate/floodgate/internal/rules"
)

// loadRLQSBootstrap parses envoy-rlqs.yaml as Envoy does (YAML to JSON to
// the v3 Bootstrap, unknown fields and unresolvable types rejected) and
// validates it and every message packed in an Any.
func loadRLQSBootstrap(t *testing.T) (*bootstrapv3.Bootstrap, map[string][]protoreflect.ProtoMessage) {
	t.Helper()
	data, err := os.ReadFile("envoy-rlqs.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatalf("envoy-rlqs.yaml: %v", err)
	}
	js, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	var b bootstrapv3.Bootstrap
	if err := protojson.Unmarshal(js, &b); err != nil {
		t.Fatalf("envoy-rlqs.yaml is not a v3 Bootstrap: %v", err)
	}
	if err := b.ValidateAll(); err != nil {
		t.Fatalf("Bootstrap.ValidateAll: %v", err)
	}
	byType := map[string][]protoreflect.ProtoMessage{}
	err = protorange.Range(b.ProtoReflect(), func(v protopath.Values) error {
		m, ok := v.Index(-1).Value.Interface().(protoreflect.Message)
		if !ok || m.Descriptor().FullName() != "google.protobuf.Any" {
			return nil
		}
		a := m.Interface().(*anypb.Any)
		inner, err := a.UnmarshalNew()
		if err != nil {
			return fmt.Errorf("%s: %w", v.Path, err)
		}
		vi, ok := inner.(validator)
		if !ok {
			return fmt.Errorf("%s: %s has no validation rules", v.Path, a.TypeUrl)
		}
		if err := vi.ValidateAll(); err != nil {
			return fmt.Errorf("%s (%s): %w", v.Path, a.TypeUrl, err)
		}
		byType[a.TypeUrl] = append(byType[a.TypeUrl], inner)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return &b, byType
}

// TestEnvoyRLQSBootstrapValid: the RLQS bootstrap is a valid Bootstrap,
// its rate_limit_quota filter points at the floodgate cluster with the
// domain of quota.yaml, and every bucket its matchers build is governed
// by a quota.yaml entry.
func TestEnvoyRLQSBootstrapValid(t *testing.T) {
	b, byType := loadRLQSBootstrap(t)
	filters := byType["type.googleapis.com/envoy.extensions.filters.http.rate_limit_quota.v3.RateLimitQuotaFilterConfig"]
	if len(filters) != 1 {
		t.Fatalf("%d rate_limit_quota filters, want 1", len(filters))
	}
	f := filters[0].(*rlqfilterv3.RateLimitQuotaFilterConfig)
	if got := f.GetRlqsServer().GetEnvoyGrpc().GetClusterName(); got != "floodgate" {
		t.Errorf("rlqs_server cluster %q, want floodgate", got)
	}
	found := false
	for _, c := range b.GetStaticResources().GetClusters() {
		found = found || c.GetName() == "floodgate"
	}
	if !found {
		t.Error("no floodgate cluster")
	}
	if len(byType["type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager"]) != 1 {
		t.Error("no HttpConnectionManager")
	} else {
		hcm := byType["type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager"][0].(*hcmv3.HttpConnectionManager)
		if hf := hcm.GetHttpFilters(); len(hf) < 2 || hf[len(hf)-1].GetName() != "envoy.filters.http.router" {
			t.Error("the router is not the last HTTP filter")
		}
	}

	cfg, err := rules.Load("quota.yaml", rules.Options{})
	if err != nil {
		t.Fatalf("quota.yaml: %v", err)
	}
	if !cfg.HasDomain(f.GetDomain()) {
		t.Fatalf("quota.yaml has no domain %q", f.GetDomain())
	}
	var settings []*rlqfilterv3.RateLimitQuotaBucketSettings
	collect := func(a *xdsmatcher.Matcher_OnMatch) {
		s := &rlqfilterv3.RateLimitQuotaBucketSettings{}
		if err := a.GetAction().GetTypedConfig().UnmarshalTo(s); err != nil {
			t.Fatalf("bucket action: %v", err)
		}
		settings = append(settings, s)
	}
	m := f.GetBucketMatchers()
	for _, fm := range m.GetMatcherList().GetMatchers() {
		collect(fm.GetOnMatch())
	}
	if m.GetOnNoMatch() != nil {
		collect(m.GetOnNoMatch())
	}
	if len(settings) != 2 {
		t.Fatalf("%d bucket settings, want 2", len(settings))
	}
	for _, s := range settings {
		id := map[string]string{}
		for k, v := range s.GetBucketIdBuilder().GetBucketIdBuilder() {
			id[k] = v.GetStringValue()
			if v.GetCustomValue() != nil {
				id[k] = "some-key" // a value from a request header
			}
		}
		q := cfg.MatchQuota(f.GetDomain(), id)
		if q == nil || q.Action != rules.QuotaRateLimit {
			t.Errorf("bucket %v: no rate_limit entry in quota.yaml governs it (%v)", id, q)
		}
		if s.GetReportingInterval().AsDuration() <= 0 {
			t.Errorf("bucket %v: no reporting_interval", id)
		}
	}
}
