package rlqs

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/floodgate/floodgate/internal/lenientcodec"
	"github.com/floodgate/floodgate/internal/testkit"
	"github.com/floodgate/floodgate/store/memstore"
)

// syncBuffer is a log sink safe for the handler's goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestNonUTF8BucketIDDropped: over gRPC with the server's codec, a report
// with bucket ids that are not UTF-8 (Envoy copies header bytes into them)
// gets assignments for its other buckets only, in a response a strict
// proto3 parser reads; the dropped ids are counted, and the stream stays
// open for the next report.
func TestNonUTF8BucketIDDropped(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	svc := New(Settings{Rules: testkit.StaticRules(testkit.ParseRules(t, testQuota)), Demand: memstore.NewDemand(), Metrics: m})
	lis := bufconn.Listen(1 << 20)
	gs := grpc.NewServer(grpc.ForceServerCodecV2(lenientcodec.Codec{}))
	rlqsv3.RegisterRateLimitQuotaServiceServer(gs, svc)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(lenientcodec.Codec{})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := rlqsv3.NewRateLimitQuotaServiceClient(conn).StreamRateLimitQuotas(ctx)
	if err != nil {
		t.Fatal(err)
	}
	usage := func(id map[string]string) *rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage {
		return &rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{BucketId: &rlqsv3.BucketId{Bucket: id}, NumRequestsAllowed: 1, TimeElapsed: durationpb.New(time.Second)}
	}
	for i, good := range []string{"ok", "ok2"} {
		err := s.Send(&rlqsv3.RateLimitQuotaUsageReports{Domain: "d", BucketQuotaUsages: []*rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{
			usage(map[string]string{"k": "\xff\xfe"}), usage(map[string]string{"k": good}), usage(map[string]string{"k": "v", "\x80": "v"}), usage(map[string]string{"k": "\xc3"}),
		}})
		if err != nil {
			t.Fatalf("report %d: %v", i, err)
		}
		r, err := s.Recv()
		if err != nil {
			t.Fatalf("report %d: stream ended %v", i, err)
		}
		if _, err := proto.Marshal(r); err != nil {
			t.Errorf("report %d: a strict proto3 encoder refuses the response: %v", i, err)
		}
		if len(r.GetBucketAction()) != 1 || r.GetBucketAction()[0].GetBucketId().GetBucket()["k"] != good || r.GetBucketAction()[0].GetQuotaAssignmentAction() == nil {
			t.Errorf("report %d: %v, want one assignment, for k=%s", i, r, good)
		}
	}
	var c dto.Metric
	_ = m.refusedIDs.Write(&c)
	if got := c.GetCounter().GetValue(); got != 6 {
		t.Errorf("floodgate_quota_refused_bucket_ids_total %v, want 6", got)
	}
}

// failingSend is a stream whose sends fail as a broken codec's would.
type failingSend struct{ *fakeStream }

func (f failingSend) Send(*rlqsv3.RateLimitQuotaResponse) error {
	return status.Error(codes.Internal, "grpc: error while marshaling: string field contains invalid UTF-8")
}

// TestInternalEndLogged: a stream ended Internal is logged as an error
// with its domain and cause.
func TestInternalEndLogged(t *testing.T) {
	var logs syncBuffer
	svc := New(Settings{Rules: testkit.StaticRules(testkit.ParseRules(t, testQuota)), Demand: memstore.NewDemand(),
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fs := &fakeStream{ctx: ctx, in: make(chan *rlqsv3.RateLimitQuotaUsageReports, 1), out: make(chan *rlqsv3.RateLimitQuotaResponse, 1)}
	fs.in <- usage("d", "x", 1)
	err := svc.StreamRateLimitQuotas(failingSend{fs})
	if status.Code(err) != codes.Internal {
		t.Fatalf("stream ended %v, want Internal", err)
	}
	if l := logs.String(); !strings.Contains(l, "level=ERROR") || !strings.Contains(l, "invalid UTF-8") || !strings.Contains(l, "domain=d") {
		t.Errorf("log %q, want an ERROR line with the domain and the cause", l)
	}

	// A client's mistake is not logged as a server error.
	var quiet syncBuffer
	svc = New(Settings{Rules: testkit.StaticRules(testkit.ParseRules(t, testQuota)), Demand: memstore.NewDemand(),
		Logger: slog.New(slog.NewTextHandler(&quiet, nil))})
	fs = &fakeStream{ctx: ctx, in: make(chan *rlqsv3.RateLimitQuotaUsageReports, 1), out: make(chan *rlqsv3.RateLimitQuotaResponse, 1)}
	fs.in <- usage("", "x", 1)
	if err := svc.StreamRateLimitQuotas(fs); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("no domain: %v, want InvalidArgument", err)
	}
	if strings.Contains(quiet.String(), "level=ERROR") {
		t.Errorf("client mistake logged as an error: %q", quiet.String())
	}
}
