package server_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	floodgatev1 "github.com/floodgate/floodgate/gen/floodgate/v1"
	"github.com/floodgate/floodgate/internal/testkit"
	"github.com/floodgate/floodgate/server"
	"github.com/floodgate/floodgate/store/memstore"
)

// serveLimited serves the RateLimiter and health through NewGRPCServer
// with GRPCLimitOptions, as serve wires it, on a loopback TCP port.
func serveLimited(t testing.TB, maxStreams uint32, maxRecv int) string {
	t.Helper()
	st := memstore.New(memstore.Config{})
	t.Cleanup(func() { st.Close() })
	srv, hs := server.NewGRPCServer(server.NewRateLimiter(st, server.CheckSettings{}), nil, server.GRPCSettings{
		Logger:        slog.New(slog.DiscardHandler),
		ServerOptions: server.GRPCLimitOptions(maxStreams, maxRecv),
	})
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

func TestGRPCLimitMessageSize(t *testing.T) {
	addr := serveLimited(t, 0, 2048)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rl := floodgatev1.NewRateLimiterClient(conn)
	tests := []struct {
		name    string
		keySize int
		want    codes.Code
	}{
		{"under the limit", 1000, codes.OK},
		// Above 2048 bytes: refused before decoding, whatever
		// NewGRPCServer's own (larger) default says.
		{"over the limit", 4000, codes.ResourceExhausted},
	}
	for _, tc := range tests {
		_, err := rl.Check(ctx, &floodgatev1.CheckRequest{
			Key:       strings.Repeat("k", tc.keySize),
			Algorithm: floodgatev1.Algorithm_ALGORITHM_TOKEN_BUCKET,
			Source:    testkit.Inline(10, time.Minute, 0),
		})
		if got := status.Code(err); got != tc.want {
			t.Errorf("%s: got %v (%v), want %v", tc.name, got, err, tc.want)
		}
	}
}

// rawHTTP2 opens a plaintext HTTP/2 connection to addr and returns the
// framer, after sending the preface and empty settings.
func rawHTTP2(t testing.TB, addr string) *http2.Framer {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(c, c)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	return fr
}

// TestGRPCLimitStreamsAndKeepalive reads what the server tells an HTTP/2
// client: the concurrent stream limit in its SETTINGS, and a GOAWAY
// "too_many_pings" for a client that pings more often than
// keepaliveMinTime allows.
func TestGRPCLimitStreamsAndKeepalive(t *testing.T) {
	tests := []struct {
		name string
		max  uint32
		want uint32
	}{
		{"explicit", 7, 7},
		{"default", 0, server.DefaultMaxConcurrentStreams},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fr := rawHTTP2(t, serveLimited(t, tc.max, 0))
			var got uint32
			var found bool
			for !found {
				f, err := fr.ReadFrame()
				if err != nil {
					t.Fatal(err)
				}
				if sf, ok := f.(*http2.SettingsFrame); ok && !sf.IsAck() {
					got, found = sf.Value(http2.SettingMaxConcurrentStreams)
					if !found {
						t.Fatal("server SETTINGS lack MAX_CONCURRENT_STREAMS")
					}
					if err := fr.WriteSettingsAck(); err != nil {
						t.Fatal(err)
					}
				}
			}
			if got != tc.want {
				t.Fatalf("MAX_CONCURRENT_STREAMS: got %d, want %d", got, tc.want)
			}

			// Ping flood: far more often than keepaliveMinTime.
			for i := range 5 {
				if err := fr.WritePing(false, [8]byte{byte(i)}); err != nil {
					t.Fatal(err)
				}
			}
			for {
				f, err := fr.ReadFrame()
				if err != nil {
					t.Fatalf("waiting for GOAWAY: %v", err)
				}
				if ga, ok := f.(*http2.GoAwayFrame); ok {
					if ga.ErrCode != http2.ErrCodeEnhanceYourCalm || string(ga.DebugData()) != "too_many_pings" {
						t.Fatalf("GOAWAY: got %v %q, want ENHANCE_YOUR_CALM too_many_pings", ga.ErrCode, ga.DebugData())
					}
					return
				}
			}
		})
	}
}
