package server_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	floodgatev1 "github.com/floodgate/floodgate/gen/floodgate/v1"
	"github.com/floodgate/floodgate/internal/testkit"
	"github.com/floodgate/floodgate/server"
	"github.com/floodgate/floodgate/store/memstore"
)

// serveGated serves the RateLimiter and health through NewGRPCServer with
// a Gate of l, on a loopback TCP port behind the gate's listener.
func serveGated(t *testing.T, l server.TransportLimits) (addr string, gate *server.Gate, hs *health.Server) {
	t.Helper()
	st := memstore.New(memstore.Config{})
	t.Cleanup(func() { st.Close() })
	gate = server.NewGate(l)
	srv, hs := server.NewGRPCServer(server.NewRateLimiter(st, server.CheckSettings{}), nil, server.GRPCSettings{
		Logger: slog.New(slog.DiscardHandler),
		Gate:   gate,
	})
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(gate.Listener(lis))
	t.Cleanup(srv.Stop)
	return lis.Addr().String(), gate, hs
}

// connFrom is a client of addr whose connections come from the loopback
// address local.
func connFrom(t *testing.T, addr, local string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) {
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
			return d.DialContext(ctx, "tcp", a)
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// checkDesc calls Check as a stream, so a test can send the headers and
// hold back the message.
var checkDesc = grpc.StreamDesc{StreamName: "Check", ClientStreams: true}

// silentCheck starts a Check that never sends its message, and returns
// what it ends with (on the channel) and how to abandon it.
func silentCheck(t *testing.T, conn *grpc.ClientConn) (<-chan error, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	s, err := conn.NewStream(ctx, &checkDesc, floodgatev1.RateLimiter_Check_FullMethodName)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.RecvMsg(&floodgatev1.CheckResponse{}) }()
	return done, cancel
}

// check is one ordinary Check on conn.
func check(conn *grpc.ClientConn) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := floodgatev1.NewRateLimiterClient(conn).Check(ctx, &floodgatev1.CheckRequest{
		Key: "k", Algorithm: floodgatev1.Algorithm_ALGORITHM_TOKEN_BUCKET, Source: testkit.Inline(1000, time.Minute, 0)})
	return err
}

// TestGateStreamLimits: calls in flight are bounded per client address
// and in total (ResourceExhausted past them); a client at its limit does
// not stop another; the places come back when calls end.
func TestGateStreamLimits(t *testing.T) {
	addr, gate, _ := serveGated(t, server.TransportLimits{MaxStreamsPerClient: 3, MaxStreams: 5, UnaryTimeout: time.Hour})
	a, b, c := connFrom(t, addr, "127.0.0.1"), connFrom(t, addr, "127.0.0.2"), connFrom(t, addr, "127.0.0.3")

	var cancels []context.CancelFunc
	for range 3 {
		_, cancel := silentCheck(t, a)
		cancels = append(cancels, cancel)
	}
	testkit.Eventually(t, "3 calls in flight", func() bool { s, _ := gate.InFlight(); return s == 3 })
	if err := check(a); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("a 4th call from 127.0.0.1: %v, want ResourceExhausted", err)
	}
	if err := check(b); err != nil {
		t.Fatalf("a call from 127.0.0.2 while 127.0.0.1 is at its limit: %v", err)
	}
	for range 2 {
		_, cancel := silentCheck(t, b)
		cancels = append(cancels, cancel)
	}
	testkit.Eventually(t, "5 calls in flight", func() bool { s, _ := gate.InFlight(); return s == 5 })
	if err := check(c); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("a call from 127.0.0.3 with 5 in flight: %v, want ResourceExhausted", err)
	}
	for _, cancel := range cancels {
		cancel()
	}
	testkit.Eventually(t, "the calls' places back", func() bool { s, _ := gate.InFlight(); return s == 0 })
	for _, conn := range []*grpc.ClientConn{a, b, c} {
		if err := check(conn); err != nil {
			t.Fatalf("a call after the others ended: %v", err)
		}
	}
}

// TestGateUnaryTimeout: a unary call whose message never comes ends with
// DeadlineExceeded at UnaryTimeout, whatever the client's deadline;
// streaming calls (health Watch) have no such deadline.
func TestGateUnaryTimeout(t *testing.T) {
	addr, gate, _ := serveGated(t, server.TransportLimits{UnaryTimeout: 200 * time.Millisecond})
	conn := connFrom(t, addr, "127.0.0.1")

	watch, err := healthpb.NewHealthClient(conn).Watch(t.Context(), &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := watch.Recv(); err != nil || r.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("Watch: %v %v", r, err)
	}
	done, cancel := silentCheck(t, conn) // its own deadline is a minute
	defer cancel()
	select {
	case err := <-done:
		if status.Code(err) != codes.DeadlineExceeded {
			t.Fatalf("a Check without its message: %v, want DeadlineExceeded", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a Check without its message still open after 30s")
	}
	// The Watch outlived the unary deadline, and still counts. The gate
	// releases an ended call's count on a goroutine of its own, which may
	// run just after the caller saw the end.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		s, _ := gate.InFlight()
		if s == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("in flight 5s after the Check ended: %d, want 1 (the Watch)", s)
		}
	}
	if err := check(conn); err != nil {
		t.Fatalf("an ordinary Check: %v", err)
	}
}

// TestGateConnectionLimits: connections past the per-client or total
// limit are closed when accepted; closing one frees its place.
func TestGateConnectionLimits(t *testing.T) {
	gate := server.NewGate(server.TransportLimits{MaxConnectionsPerClient: 2, MaxConnections: 3})
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lis := gate.Listener(inner)
	t.Cleanup(func() { lis.Close() })
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(io.Discard, c); c.Close() }() // holds it until the client closes
		}
	}()
	dial := func(local string) net.Conn {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
		c, err := d.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	// closedByServer reports whether the server closed c (a read ends at
	// once) rather than holding it (the read times out).
	closedByServer := func(c net.Conn) bool {
		_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		_, err := c.Read(make([]byte, 1))
		ne, ok := err.(net.Error)
		return !(ok && ne.Timeout())
	}
	a1, a2 := dial("127.0.0.1"), dial("127.0.0.1")
	testkit.Eventually(t, "2 connections admitted", func() bool { _, n := gate.InFlight(); return n == 2 })
	if a3 := dial("127.0.0.1"); !closedByServer(a3) {
		t.Fatal("a 3rd connection from 127.0.0.1 was held; want it closed")
	}
	b1 := dial("127.0.0.2")
	if closedByServer(b1) {
		t.Fatal("127.0.0.2's first connection was closed")
	}
	if c1 := dial("127.0.0.3"); !closedByServer(c1) {
		t.Fatal("a 4th connection in all was held; want it closed")
	}
	if closedByServer(a1) || closedByServer(a2) {
		t.Fatal("an admitted connection was closed")
	}
	a1.Close()
	testkit.Eventually(t, "a place freed", func() bool { _, n := gate.InFlight(); return n == 2 })
	if c2 := dial("127.0.0.3"); closedByServer(c2) {
		t.Fatal("a connection after one closed was refused")
	}
}
