package e2e

import (
	"bytes"
	"context"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding"
	protocodec "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/types/known/durationpb"

	floodgatev1 "github.com/floodgate/floodgate/gen/floodgate/v1"
)

// rawBytesCodec marshals like protobuf, then turns every '~' of the wire
// bytes into 0xff: the way to put bytes that are not UTF-8 into a proto3
// string, which protobuf-go refuses to marshal (Envoy does not: it copies
// header bytes into descriptor values as they are).
type rawBytesCodec struct{}

func (rawBytesCodec) Name() string { return protocodec.Name }

func (rawBytesCodec) Marshal(v any) (mem.BufferSlice, error) {
	data, err := encoding.GetCodecV2(protocodec.Name).Marshal(v)
	if err != nil {
		return nil, err
	}
	b := bytes.ReplaceAll(data.Materialize(), []byte("~"), []byte{0xff})
	return mem.BufferSlice{mem.SliceBuffer(b)}, nil
}

func (rawBytesCodec) Unmarshal(data mem.BufferSlice, v any) error {
	return encoding.GetCodecV2(protocodec.Name).Unmarshal(data, v)
}

const bytesRules = `domain: bytes
descriptors:
  - key: remote_address
    rate_limit: {unit: hour, requests_per_unit: 2}
`

// TestNonUTF8BytesAreDecided: a descriptor value or a
// key holding a byte that is not UTF-8 used to fail in the server's codec
// (INTERNAL, uncounted), and Envoy's filter fails open on errors, so one
// byte skipped every limit. Now such bytes are the value: limited, counted
// apart from other values, and counted in the metrics, on both APIs.
func TestNonUTF8BytesAreDecided(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b envoyBackend) {
		p := b.serve(t, "--config", writeRules(t, bytesRules))
		conn, err := grpc.NewClient(p.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.ForceCodecV2(rawBytesCodec{})))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		rls := rlsv3.NewRateLimitServiceClient(conn)
		ask := func(value string) string {
			t.Helper()
			resp, err := rls.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{
				Domain:      "bytes",
				Descriptors: []*ratelimitv3.RateLimitDescriptor{rlsDesc("remote_address", value)},
			})
			if err != nil {
				t.Fatalf("ShouldRateLimit(%q): %v", value, err)
			}
			return resp.OverallCode.String()
		}
		for i, want := range []string{"OK", "OK", "OVER_LIMIT"} {
			if got := ask("1.2.3.4~"); got != want {
				t.Fatalf("Envoy call %d with 1.2.3.4\\xff: %s, want %s", i+1, got, want)
			}
		}
		if got := ask("1.2.3.4~~"); got != "OK" {
			t.Fatalf("another byte string shares the counter: %s", got)
		}

		// The own API, through a client that marshals with protobuf-go:
		// the proto declares its strings unvalidated, so this needs no trick.
		cl := p.Client(t)
		limit := &floodgatev1.CheckRequest_Limit{Limit: &floodgatev1.Limit{Requests: 2, Period: durationpb.New(3600e9)}}
		for i, want := range []bool{true, true, false} {
			resp, err := cl.Check(context.Background(), &floodgatev1.CheckRequest{
				Key: "user\xff\xfe", Algorithm: floodgatev1.Algorithm_ALGORITHM_FIXED_WINDOW, Source: limit,
			})
			if err != nil {
				t.Fatalf("Check %d: %v", i+1, err)
			}
			if resp.Allowed != want {
				t.Fatalf("Check %d: allowed %v, want %v", i+1, resp.Allowed, want)
			}
		}

		samples := scrape(t, p.proc)
		wantMetric(t, samples, 4, "grpc_server_handled_total", "grpc_method", "ShouldRateLimit", "grpc_code", "OK")
		wantMetric(t, samples, 3, "grpc_server_handled_total", "grpc_method", "Check", "grpc_code", "OK")
		if n, _ := metricValue(samples, "grpc_server_handled_total", "grpc_code", "Internal"); n != 0 {
			t.Errorf("%v calls ended INTERNAL", n)
		}
	})
}
