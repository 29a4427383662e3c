package server

import (
	"cmp"
	"context"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"

	"github.com/floodgate/floodgate/internal/auth"
)

// Defaults of TransportLimits. Together they bound what one client address
// can make the server hold: at most DefaultMaxConnectionsPerClient
// connections and DefaultMaxStreamsPerClient calls in flight (each with
// its metadata, at most DefaultMaxHeaderListBytes), each unary call for at
// most DefaultUnaryTimeout.
const (
	// DefaultMaxHeaderListBytes bounds a call's metadata (HTTP/2
	// SETTINGS_MAX_HEADER_LIST_SIZE, the headers' names and values plus 32
	// bytes each), far above what real callers send.
	DefaultMaxHeaderListBytes = 16 << 10
	// DefaultUnaryTimeout bounds a unary call (Check, Reset,
	// ShouldRateLimit) from its headers to its answer, the wait for its
	// message included, whatever deadline the client sets: a call whose
	// message never comes ends with codes.DeadlineExceeded. A decision
	// takes milliseconds (Redis waits are bounded by --redis-timeout).
	DefaultUnaryTimeout = 5 * time.Second
	// DefaultMaxStreams bounds the calls in flight in the whole server;
	// calls past it are refused with codes.ResourceExhausted.
	DefaultMaxStreams = 4096
	// DefaultMaxStreamsPerClient bounds the calls in flight from one client
	// IP address, so one client cannot take the whole DefaultMaxStreams.
	// Behind a proxy that hides client addresses (a sidecar), every call
	// comes from one address: raise it to MaxStreams there.
	DefaultMaxStreamsPerClient = 512
	// DefaultMaxConnections bounds the open gRPC connections; connections
	// past it are closed as soon as they are accepted.
	DefaultMaxConnections = 1024
	// DefaultMaxConnectionsPerClient bounds the open connections from one
	// client IP address. Envoy opens one per worker thread.
	DefaultMaxConnectionsPerClient = 64
)

// TransportLimits bound what callers can hold in the gRPC server before and
// while their calls run. Zero fields take the defaults above.
type TransportLimits struct {
	// MaxHeaderListBytes bounds a call's metadata; larger header lists are
	// refused by the HTTP/2 transport (RST_STREAM) before any handler runs.
	MaxHeaderListBytes uint32
	// UnaryTimeout bounds a unary call, the wait for its message included.
	// Streaming methods (health Watch, reflection) have no such deadline
	// but count against the stream limits.
	UnaryTimeout time.Duration
	// MaxStreams and MaxStreamsPerClient bound the calls in flight in total
	// and per client IP address.
	MaxStreams, MaxStreamsPerClient int
	// MaxConnections and MaxConnectionsPerClient bound the open
	// connections in total and per client IP address (see Gate.Listener).
	MaxConnections, MaxConnectionsPerClient int
	// Auth, when set, checks bearer tokens as soon as a call's headers
	// arrive, before its message is read.
	Auth *auth.TokenAuth
}

// Gate admits calls and connections within TransportLimits. Give it to
// NewGRPCServer in GRPCSettings.Gate, which installs its ServerOptions, and
// serve on Listener(lis). A refused call costs the server no goroutine:
// the gate runs in the HTTP/2 transport (grpc.InTapHandle) when the call's
// headers arrive.
type Gate struct {
	limits TransportLimits
	// srv is the server the gate admits calls to (set by NewGRPCServer);
	// streaming, its streaming methods ("/service/method"), which get no
	// UnaryTimeout, is read from it on the first call, when every service
	// is registered (grpc-go refuses registrations once serving).
	srv       atomic.Pointer[grpc.Server]
	streaming func() map[string]bool

	mu        sync.Mutex
	streams   int
	perClient map[netip.Addr]int // calls in flight per client address
	conns     int
	connsPer  map[netip.Addr]int // connections per client address
}

// NewGate returns a gate enforcing l.
func NewGate(l TransportLimits) *Gate {
	l.MaxHeaderListBytes = cmp.Or(max(l.MaxHeaderListBytes, 0), DefaultMaxHeaderListBytes)
	l.UnaryTimeout = cmp.Or(max(l.UnaryTimeout, 0), DefaultUnaryTimeout)
	l.MaxStreams = cmp.Or(max(l.MaxStreams, 0), DefaultMaxStreams)
	l.MaxStreamsPerClient = cmp.Or(max(l.MaxStreamsPerClient, 0), DefaultMaxStreamsPerClient)
	l.MaxConnections = cmp.Or(max(l.MaxConnections, 0), DefaultMaxConnections)
	l.MaxConnectionsPerClient = cmp.Or(max(l.MaxConnectionsPerClient, 0), DefaultMaxConnectionsPerClient)
	g := &Gate{limits: l, perClient: map[netip.Addr]int{}, connsPer: map[netip.Addr]int{}}
	g.streaming = sync.OnceValue(g.streamingMethods)
	return g
}

// ServerOptions are the gRPC server options of the gate: the header-list
// limit and the tap handle.
func (g *Gate) ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.MaxHeaderListSize(g.limits.MaxHeaderListBytes),
		grpc.InTapHandle(g.tap),
	}
}

// streamingMethods are the streaming methods of the server, as
// "/service/method".
func (g *Gate) streamingMethods() map[string]bool {
	out := map[string]bool{}
	if srv := g.srv.Load(); srv != nil {
		for svc, info := range srv.GetServiceInfo() {
			for _, m := range info.Methods {
				if m.IsClientStream || m.IsServerStream {
					out["/"+svc+"/"+m.Name] = true
				}
			}
		}
	}
	return out
}

// tap admits a call when its headers arrive. It authenticates (with Auth),
// counts the call against the stream limits, refusing it with
// codes.ResourceExhausted past them, and gives unary calls their deadline.
// The returned context becomes the call's; the count is released when it
// ends.
func (g *Gate) tap(ctx context.Context, info *tap.Info) (context.Context, error) {
	if g.limits.Auth != nil {
		var err error
		if ctx, err = g.limits.Auth.Tap(ctx, info.FullMethodName); err != nil {
			return nil, err
		}
	}
	client := clientAddr(ctx)
	g.mu.Lock()
	switch {
	case g.streams >= g.limits.MaxStreams:
		g.mu.Unlock()
		return nil, status.Errorf(codes.ResourceExhausted, "server busy: %d calls in flight", g.limits.MaxStreams)
	case g.perClient[client] >= g.limits.MaxStreamsPerClient:
		g.mu.Unlock()
		return nil, status.Errorf(codes.ResourceExhausted, "too many calls in flight from this client (at most %d)", g.limits.MaxStreamsPerClient)
	}
	g.streams++
	g.perClient[client]++
	g.mu.Unlock()

	cancel := context.CancelFunc(func() {})
	if !g.streaming()[info.FullMethodName] {
		ctx, cancel = context.WithTimeout(ctx, g.limits.UnaryTimeout)
	}
	// The transport cancels the stream's context when the stream ends,
	// however it ends; ctx derives from it.
	context.AfterFunc(ctx, func() {
		cancel()
		g.mu.Lock()
		defer g.mu.Unlock()
		g.streams--
		if g.perClient[client]--; g.perClient[client] <= 0 {
			delete(g.perClient, client)
		}
	})
	return ctx, nil
}

// clientAddr is the IP address of the call's peer; the zero Addr when it
// has none (a Unix socket, an in-memory listener).
func clientAddr(ctx context.Context) netip.Addr {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return netip.Addr{}
	}
	return addrOf(p.Addr)
}

// addrOf is a net.Addr's IP address (IPv4-mapped IPv6 unmapped).
func addrOf(a net.Addr) netip.Addr {
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.AddrPort().Addr().Unmap()
	}
	return netip.Addr{}
}

// Listener wraps lis so that it admits at most MaxConnections connections,
// and MaxConnectionsPerClient from one client address; it closes those
// past the limits as soon as it accepts them (the client sees the
// connection reset and retries with backoff), so a client holding its
// share does not keep others waiting in the accept queue.
func (g *Gate) Listener(lis net.Listener) net.Listener { return &gateListener{Listener: lis, g: g} }

type gateListener struct {
	net.Listener
	g *Gate
}

// Accept returns the next connection within the limits.
func (l *gateListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		client := addrOf(c.RemoteAddr())
		if !l.g.admitConn(client) {
			_ = c.Close()
			continue
		}
		return &gateConn{Conn: c, release: sync.OnceFunc(func() { l.g.releaseConn(client) })}, nil
	}
}

func (g *Gate) admitConn(client netip.Addr) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.conns >= g.limits.MaxConnections || g.connsPer[client] >= g.limits.MaxConnectionsPerClient {
		return false
	}
	g.conns++
	g.connsPer[client]++
	return true
}

func (g *Gate) releaseConn(client netip.Addr) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.conns--
	if g.connsPer[client]--; g.connsPer[client] <= 0 {
		delete(g.connsPer, client)
	}
}

// gateConn releases its connection's place when closed.
type gateConn struct {
	net.Conn
	release func()
}

// Close closes the connection and releases its place (once).
func (c *gateConn) Close() error {
	err := c.Conn.Close()
	c.release()
	return err
}

// Defaults of GRPCLimitOptions and the keepalive policy it sets.
const (
	// DefaultMaxConcurrentStreams bounds the calls in flight on one
	// connection (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS). Envoy multiplexes
	// a worker's rate-limit calls on one connection, so this is generous.
	// A client past it queues, it is not refused.
	DefaultMaxConcurrentStreams = 1024

	// keepaliveMinTime is the shortest interval between client pings the
	// server accepts (the enforcement policy). Clients pinging more often
	// get GOAWAY "too_many_pings". Pings are allowed on connections with no
	// call in flight too, since Envoy and grpc-go clients keep idle
	// connections warm that way.
	keepaliveMinTime = 10 * time.Second
	// keepaliveMaxConnectionIdle closes (with GOAWAY, which clients follow
	// by reconnecting when needed) a connection that had no call for this
	// long, so connections from clients that went away do not pile up.
	keepaliveMaxConnectionIdle = 5 * time.Minute
	// keepaliveTime is how long a connection may be silent before the
	// server pings the client to check it is still there.
	keepaliveTime = time.Minute
	// keepaliveTimeout is how long the server waits for that ping's answer
	// before closing the connection.
	keepaliveTimeout = 20 * time.Second
	// handshakeTimeout bounds the connection setup (TCP accepted to the
	// end of the TLS and HTTP/2 handshakes), so a client that connects and
	// says nothing cannot hold a connection for long.
	handshakeTimeout = 10 * time.Second
)

// GRPCLimitOptions are the server options that bound what one client can
// hold: maxConcurrentStreams calls in flight per connection (0 means
// DefaultMaxConcurrentStreams), request messages of at most maxRecvMsg
// bytes (0 means DefaultMaxRecvMsgBytes; larger ones are refused with
// codes.ResourceExhausted), the keepalive enforcement policy (MinTime
// keepaliveMinTime, PermitWithoutStream true), the server's keepalive
// parameters (keepaliveMaxConnectionIdle, keepaliveTime, keepaliveTimeout;
// no maximum connection age) and handshakeTimeout.
//
// Pass them in GRPCSettings.ServerOptions: they come after NewGRPCServer's
// own options and so override its MaxRecvMsgSize.
func GRPCLimitOptions(maxConcurrentStreams uint32, maxRecvMsg int) []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.MaxConcurrentStreams(cmp.Or(maxConcurrentStreams, DefaultMaxConcurrentStreams)),
		grpc.MaxRecvMsgSize(cmp.Or(max(maxRecvMsg, 0), DefaultMaxRecvMsgBytes)),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{
			MinTime:             keepaliveMinTime,
			PermitWithoutStream: true,
		}),
		grpc.KeepaliveParams(keepalive.ServerParameters{
			MaxConnectionIdle: keepaliveMaxConnectionIdle,
			Time:              keepaliveTime,
			Timeout:           keepaliveTimeout,
		}),
		grpc.ConnectionTimeout(handshakeTimeout),
	}
}
