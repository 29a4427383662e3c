// Package xdstest runs go-control-plane's own management server (a
// snapshot cache behind pkg/server/v3) on a loopback address for tests of
// floodgate's xDS rules client, recording every request it gets.
package xdstest

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	rlconfv3 "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"google.golang.org/grpc"
)

// Server is a management server serving RateLimitConfig snapshots to one
// node.
type Server struct {
	cache cachev3.SnapshotCache
	srv   *grpc.Server
	addr  string
	node  string

	mu   sync.Mutex
	reqs []*discoveryv3.DiscoveryRequest
}

// Start serves a new snapshot cache for node on addr ("127.0.0.1:0" for
// any port) with the given gRPC server options; it stops when the test
// ends. A restarted server may take its predecessor's port, which can take
// a moment to be free, so listening is retried for up to 5 s.
func Start(t testing.TB, addr, node string, opts ...grpc.ServerOption) *Server {
	t.Helper()
	m := &Server{cache: cachev3.NewSnapshotCache(false, cachev3.IDHash{}, nil), node: node}
	cb := serverv3.CallbackFuncs{StreamRequestFunc: func(_ int64, r *discoveryv3.DiscoveryRequest) error {
		m.mu.Lock()
		defer m.mu.Unlock()
		m.reqs = append(m.reqs, r)
		return nil
	}}
	var lis net.Listener
	var err error
	for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
		if lis, err = net.Listen("tcp", addr); err == nil || time.Since(start) > 5*time.Second {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	m.addr = lis.Addr().String()
	m.srv = grpc.NewServer(opts...)
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(m.srv, serverv3.NewServer(context.Background(), m.cache, cb))
	go func() { _ = m.srv.Serve(lis) }()
	t.Cleanup(m.srv.Stop)
	return m
}

// Addr is the address the server listens on.
func (m *Server) Addr() string { return m.addr }

// Stop ends the server at once, closing its streams.
func (m *Server) Stop() { m.srv.Stop() }

// Set publishes version with one RateLimitConfig resource per config.
func (m *Server) Set(t testing.TB, version string, configs ...*rlconfv3.RateLimitConfig) {
	t.Helper()
	res := make([]types.Resource, len(configs))
	for i, c := range configs {
		res[i] = c
	}
	snap, err := cachev3.NewSnapshot(version, map[resourcev3.Type][]types.Resource{resourcev3.RateLimitConfigType: res})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.cache.SetSnapshot(context.Background(), m.node, snap); err != nil {
		t.Fatal(err)
	}
}

// Wait waits up to within for a request ok accepts and returns it; the
// test fails, naming what, if none comes.
func (m *Server) Wait(t testing.TB, within time.Duration, what string, ok func(*discoveryv3.DiscoveryRequest) bool) *discoveryv3.DiscoveryRequest {
	t.Helper()
	for start := time.Now(); time.Since(start) < within; time.Sleep(5 * time.Millisecond) {
		if r := m.find(ok); r != nil {
			return r
		}
	}
	t.Fatalf("no %s in %v", what, within)
	return nil
}

func (m *Server) find(ok func(*discoveryv3.DiscoveryRequest) bool) *discoveryv3.DiscoveryRequest {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range m.reqs {
		if ok(r) {
			return r
		}
	}
	return nil
}

// Count is how many requests so far ok accepts.
func (m *Server) Count(ok func(*discoveryv3.DiscoveryRequest) bool) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, r := range m.reqs {
		if ok(r) {
			n++
		}
	}
	return n
}

// IsNACK reports whether r refuses the version it answers.
func IsNACK(r *discoveryv3.DiscoveryRequest) bool { return r.GetErrorDetail() != nil }

// Forget drops the requests recorded so far: Wait and Count then see only
// later ones.
func (m *Server) Forget() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reqs = nil
}
