package xdsrules

import (
	"testing"

	rlconfv3 "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/floodgate/floodgate/internal/rules"
)

// TestConvertQuotaModeAndMetadata: quota_mode and metadata reach the
// limit as a file would carry them; the metadata Struct is the same one.
func TestConvertQuotaModeAndMetadata(t *testing.T) {
	meta, err := structpb.NewStruct(map[string]any{
		"service_with_quota": map[string]any{"name": `svc "1"` + "\n: #x"},
		"weight":             2.5,
		"on":                 true,
		"none":               nil,
		"list":               []any{1.0, "a"},
	})
	if err != nil {
		t.Fatal(err)
	}
	rc := &rlconfv3.RateLimitConfig{Name: "rl", Domain: "edge", Descriptors: []*rlconfv3.RateLimitDescriptor{
		{Key: "service", Value: "s1", QuotaMode: true, Metadata: meta, RateLimit: perHour(1)},
		{Key: "plain", RateLimit: perHour(1), Metadata: &structpb.Struct{}},
	}}
	c, err := convertOne("rl", "1", rc, "")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		entry rules.Entry
		quota bool
		meta  *structpb.Struct
	}{
		{rules.Entry{Key: "service", Value: "s1"}, true, meta},
		{rules.Entry{Key: "plain", Value: "x"}, false, nil},
	}
	for _, tt := range tests {
		ls := c.Match("edge", []rules.Entry{tt.entry})
		if len(ls) != 1 {
			t.Fatalf("%v: %d limits", tt.entry, len(ls))
		}
		if ls[0].QuotaMode != tt.quota {
			t.Errorf("%v: QuotaMode = %v, want %v", tt.entry, ls[0].QuotaMode, tt.quota)
		}
		if got := ls[0].Metadata; !proto.Equal(got, tt.meta) && !(got == nil && tt.meta == nil) {
			t.Errorf("%v: Metadata = %v, want %v", tt.entry, got, tt.meta)
		}
	}
}
