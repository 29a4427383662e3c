package httpapi_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/durationpb"

	floodgatev1 "github.com/floodgate/floodgate/gen/floodgate/v1"
	"github.com/floodgate/floodgate/internal/observability"
	"github.com/floodgate/floodgate/server"
	"github.com/floodgate/floodgate/server/httpapi"
	"github.com/floodgate/floodgate/store/memstore"
)

const benchKeys = 10_000

// benchServer is one floodgate as `floodgate serve` wires it: the gRPC
// server and the HTTP port (admin endpoints and the API) on loopback TCP,
// over one embedded store.
type benchServer struct {
	grpcConn *grpc.ClientConn
	httpURL  string
	http     *http.Client
}

func startBench(b *testing.B) *benchServer {
	b.Helper()
	st := memstore.New(memstore.Config{})
	rl := server.NewRateLimiter(st, server.CheckSettings{})
	rlHTTP := server.NewRateLimiter(st, server.CheckSettings{API: observability.APIHTTP})
	gs, hs := server.NewGRPCServer(rl, nil, server.GRPCSettings{})
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	glis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go gs.Serve(glis)
	hsrv := server.NewAdminServer(server.NewAdminHandler(server.AdminSettings{API: httpapi.New(rlHTTP, httpapi.Settings{})}))
	hlis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go hsrv.Serve(hlis)
	conn, err := grpc.NewClient(glis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		conn.Close()
		gs.Stop()
		hsrv.Close()
		st.Close()
	})
	return &benchServer{
		grpcConn: conn,
		httpURL:  "http://" + hlis.Addr().String(),
		http:     &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}},
	}
}

// benchChecks are Checks of 10,000 distinct keys that are always allowed.
func benchChecks(b *testing.B) []*floodgatev1.CheckRequest {
	reqs := make([]*floodgatev1.CheckRequest, benchKeys)
	seen := map[string]bool{}
	for i := range reqs {
		reqs[i] = &floodgatev1.CheckRequest{
			Key: "user:" + strconv.Itoa(i), Algorithm: floodgatev1.Algorithm_ALGORITHM_TOKEN_BUCKET,
			Source: &floodgatev1.CheckRequest_Limit{Limit: &floodgatev1.Limit{Requests: 1 << 30, Period: durationpb.New(time.Second)}},
		}
		seen[reqs[i].Key] = true
	}
	if len(seen) != benchKeys {
		b.Fatalf("%d distinct keys, want %d", len(seen), benchKeys)
	}
	return reqs
}

// processCPU is the CPU time this process (clients and server) used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// measure runs call in parallel (16 callers per CPU, to cover loopback
// round trips) and reports, besides ns/op, decisions/s and the process
// CPU per call (caller and server together, both in this process).
func measure(b *testing.B, call func(i int) error) {
	b.ReportAllocs()
	b.SetParallelism(16)
	cpu0, t0 := processCPU(), time.Now()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			if err := call(i % benchKeys); err != nil {
				b.Error(err)
				return
			}
			i += 7
		}
	})
	b.StopTimer()
	el, cpu := time.Since(t0), processCPU()-cpu0
	b.ReportMetric(float64(b.N)/el.Seconds(), "calls/s")
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/call")
}

// BenchmarkFrontDoors compares the two front doors of one server, each
// next to its bare transport's ceiling: gRPC Check and grpc.health.v1
// Check; HTTP POST /v1/check and GET /healthz. The ratios between them,
// taken in one run, are what bench/RESULTS.md records.
func BenchmarkFrontDoors(b *testing.B) {
	s := startBench(b)
	reqs := benchChecks(b)
	bodies := make([][]byte, len(reqs))
	for i, r := range reqs {
		js, err := protojson.Marshal(r)
		if err != nil {
			b.Fatal(err)
		}
		bodies[i] = js
	}
	rl := floodgatev1.NewRateLimiterClient(s.grpcConn)
	health := healthpb.NewHealthClient(s.grpcConn)
	ctx := context.Background()
	allowed := []byte(`"allowed":true`)

	b.Run("grpc/health", func(b *testing.B) {
		measure(b, func(int) error {
			_, err := health.Check(ctx, &healthpb.HealthCheckRequest{})
			return err
		})
	})
	b.Run("grpc/check", func(b *testing.B) {
		measure(b, func(i int) error {
			resp, err := rl.Check(ctx, reqs[i])
			if err == nil && !resp.Allowed {
				err = errDenied
			}
			return err
		})
	})
	b.Run("http/healthz", func(b *testing.B) {
		measure(b, func(int) error {
			_, err := httpDo(s.http, http.MethodGet, s.httpURL+"/healthz", nil)
			return err
		})
	})
	b.Run("http/check", func(b *testing.B) {
		measure(b, func(i int) error {
			body, err := httpDo(s.http, http.MethodPost, s.httpURL+httpapi.PathCheck, bodies[i])
			if err == nil && !bytes.Contains(body, allowed) {
				err = errDenied
			}
			return err
		})
	})
}

type benchError string

func (e benchError) Error() string { return string(e) }

const errDenied = benchError("denied: the benchmark's limits never deny")

// httpDo sends one request and reads the whole answer, so the connection
// is reused.
func httpDo(c *http.Client, method, url string, body []byte) ([]byte, error) {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = benchError(resp.Status + ": " + string(out))
	}
	return out, err
}
