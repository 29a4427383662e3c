package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// TestHTTPGateCountsApart: the HTTP port counts its connections with a
// gate of its own. With one connection per client allowed, a client
// holding one on the HTTP port still gets one on the gRPC port, and its
// second on the HTTP port is closed.
func TestHTTPGateCountsApart(t *testing.T) {
	f, st := adminTestStore(t)
	f.limits.MaxConnectionsPerClient = 1
	reg, metrics := newMetrics()
	env := serveEnv{f: &f, reg: reg, metrics: metrics, log: slog.New(slog.DiscardHandler)}
	p, err := env.buildGRPCPipeline(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	var draining atomic.Bool
	admin, err := env.buildAdmin(st, decisionAPIs{}, p, &draining)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.lis.Close()
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	grpcLis := p.gate.Listener(raw)
	defer grpcLis.Close()

	accepted := func(lis net.Listener) <-chan net.Conn {
		ch := make(chan net.Conn, 1)
		go func() {
			if c, err := lis.Accept(); err == nil {
				ch <- c
			}
		}()
		return ch
	}
	dial := func(lis net.Listener) net.Conn {
		c, err := net.Dial("tcp", lis.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	for _, port := range []struct {
		name string
		lis  net.Listener
	}{{"HTTP", admin.lis}, {"gRPC", grpcLis}} {
		ch := accepted(port.lis)
		dial(port.lis)
		select {
		case c := <-ch:
			defer c.Close()
		case <-time.After(10 * time.Second):
			t.Fatalf("the %s port did not accept a client's first connection", port.name)
		}
	}
	accepted(admin.lis) // closes what is over the limit, until the listener closes
	second := dial(admin.lis)
	_ = second.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := second.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("a client's second HTTP connection: read %v, want it closed (EOF)", err)
	}
}
