package loadgen_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/floodgate/floodgate/internal/loadgen"
	"github.com/floodgate/floodgate/internal/rules"
	"github.com/floodgate/floodgate/server/rlqs"
	"github.com/floodgate/floodgate/store/memstore"
)

type fixedConfig struct{ c *rules.Set }

func (f fixedConfig) Current() *rules.Set { return f.c }

// TestRunRLQS: a short run against the real service answers every report
// and counts reports as messages × buckets.
func TestRunRLQS(t *testing.T) {
	cfg, err := rules.Parse("bench.yaml", []byte(loadgen.RLQSConfigYAML("bench", 1000)))
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	rlqsv3.RegisterRateLimitQuotaServiceServer(srv, rlqs.New(rlqs.Settings{Rules: fixedConfig{cfg}, Demand: memstore.NewDemand()}))
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(lis)
	defer srv.Stop()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	res, err := loadgen.RunRLQS(context.Background(), loadgen.RLQSConfig{
		Conns: []grpc.ClientConnInterface{conn}, Domain: "bench", Streams: 3, Buckets: 4,
		Duration: 300 * time.Millisecond, Warmup: 50 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Messages == 0 || res.Reports != res.Messages*4 || res.Errors != 0 || res.Latency.Count() != res.Messages {
		t.Errorf("result %+v", res)
	}
	var out strings.Builder
	if err := res.WriteText(&out); err != nil || !strings.Contains(out.String(), "reports processed") {
		t.Errorf("WriteText: %v\n%s", err, out.String())
	}
	if _, err := loadgen.RunRLQS(context.Background(), loadgen.RLQSConfig{Domain: "bench", Streams: 1, Buckets: 1, Duration: time.Second}); err == nil {
		t.Error("a run without connections was accepted")
	}
}
