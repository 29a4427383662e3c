// Package xdsrules takes floodgate's rules from an xDS management server,
// as envoyproxy/ratelimit does: a state-of-the-world subscription over ADS
// to every RateLimitConfig resource. Each response is converted to the
// rules a YAML file gives (Convert) and handed to the caller; it is then
// ACKed, or NACKed with the error while the previous rules keep serving.
package xdsrules

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	sotw "github.com/envoyproxy/go-control-plane/pkg/client/sotw/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/floodgate/floodgate/internal/rules"
)

// Default backoff between two attempts to reach the management server.
const (
	DefaultBackoffMin = 250 * time.Millisecond
	DefaultBackoffMax = 30 * time.Second
)

// Options configure a Client.
type Options struct {
	// Server is the management server's HOST:PORT.
	Server string
	// NodeID identifies this floodgate to the management server (the
	// snapshot cache's key).
	NodeID string
	// TLS, when not nil, secures the connection; nil connects in plain
	// text.
	TLS *tls.Config
	// DefaultAlgorithm, when not empty, is the algorithm of every xDS
	// limit (else algorithms.Compatible).
	DefaultAlgorithm string
	// BackoffMin and BackoffMax bound the wait before reconnecting, which
	// doubles after every attempt that got no response. Zero: defaults.
	BackoffMin, BackoffMax time.Duration
	// Apply is called with the rules of every valid response, one per
	// resource (none: no xDS domains), and the response's version. An
	// error refuses them: the response is NACKed with it.
	Apply func(parts []*rules.Set, version string) error
	// Log receives connection and NACK reports; nil discards them.
	Log *slog.Logger
}

// Client is a subscription to RateLimitConfig resources by
// go-control-plane's ADS client (pkg/client/sotw/v3), which keeps the
// nonces and the version last ACKed; Client adds the reconnection backoff,
// the backoff of repeated NACKs, and Convert and Apply.
type Client struct {
	opts Options
	conn *grpc.ClientConn
	// nacked is the version last NACKed, and nackWait how long the next
	// NACK of that same version waits (see stream). Owned by Run.
	nacked   string
	nackWait time.Duration
}

// New returns a client of o.Server; nothing is dialled until Run.
func New(o Options) (*Client, error) {
	if o.Server == "" {
		return nil, errors.New("xds: no management server address")
	}
	if o.Apply == nil {
		return nil, errors.New("xds: no Apply func")
	}
	o.BackoffMin = cmp.Or(max(o.BackoffMin, 0), DefaultBackoffMin)
	if o.BackoffMax < o.BackoffMin {
		o.BackoffMax = max(DefaultBackoffMax, o.BackoffMin)
	}
	o.Log = cmp.Or(o.Log, slog.New(slog.DiscardHandler))
	creds := insecure.NewCredentials()
	if o.TLS != nil {
		creds = credentials.NewTLS(o.TLS)
	}
	// gRPC's own reconnection backoff (1s growing to 2 minutes by
	// default) would otherwise decide when a stream can open again.
	conn, err := grpc.NewClient(o.Server, grpc.WithTransportCredentials(creds),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: o.BackoffMin, Multiplier: 2, Jitter: 0.2, MaxDelay: o.BackoffMax},
			MinConnectTimeout: 5 * time.Second,
		}))
	if err != nil {
		return nil, fmt.Errorf("xds: %w", err)
	}
	return &Client{opts: o, conn: conn}, nil
}

// Run subscribes until ctx ends, reopening the stream with backoff
// whenever it fails, and then closes the connection.
func (c *Client) Run(ctx context.Context) {
	defer c.conn.Close()
	// One ADS client for every stream: a new stream starts from the
	// version last ACKed on any of them. No resource names: a wildcard
	// subscription to every resource of the type.
	cc := &watchedConn{cc: c.conn}
	ads := sotw.NewADSClient(ctx, &corev3.Node{Id: c.opts.NodeID}, typeURL)
	wait := c.opts.BackoffMin
	for {
		got, err := c.stream(ctx, ads, cc)
		if ctx.Err() != nil {
			return
		}
		if got {
			wait = c.opts.BackoffMin // the server answered: start over
		}
		// Full jitter in [wait/2, wait): replicas restarted together do
		// not reconnect in step.
		sleep := wait/2 + rand.N(wait/2+1)
		c.opts.Log.Warn("xds: management server stream ended; reconnecting", "server", c.opts.Server, "err", err, "retry_in", sleep.Round(time.Millisecond))
		t := time.NewTimer(sleep)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		wait = min(wait*2, c.opts.BackoffMax)
	}
}

// stream runs one ADS stream until it fails; got reports whether the
// server sent any response on it.
func (c *Client) stream(ctx context.Context, ads sotw.ADSClient, cc *watchedConn) (got bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends the stream, whatever ended the loop
	cc.ctx = ctx
	if err := ads.InitConnect(cc); err != nil {
		return false, err
	}
	for {
		if _, err := ads.Fetch(); err != nil {
			return got, err
		}
		if !got {
			c.opts.Log.Info("xds: connected to the management server", "server", c.opts.Server, "node", c.opts.NodeID)
		}
		got = true
		nack, repeat := c.answer(cc.last)
		if repeat {
			// A management server may send a NACKed version straight
			// back (go-control-plane's snapshot cache does: the version
			// differs from the one ACKed), and again for every NACK.
			// Each NACK of the same version waits longer, as a
			// reconnection does, so that the loop does not spin; a new
			// version is seen once the wait is over.
			t := time.NewTimer(c.nackWait)
			select {
			case <-ctx.Done():
				t.Stop()
				return got, ctx.Err()
			case <-t.C:
			}
			c.nackWait = min(c.nackWait*2, c.opts.BackoffMax)
		}
		if nack != "" {
			err = ads.Nack(nack)
		} else {
			err = ads.Ack()
		}
		if err != nil {
			return got, err
		}
	}
}

// answer applies one response and returns the NACK's message, or ""
// to ACK it; repeat reports a NACK of the version NACKed last time.
func (c *Client) answer(resp *discoveryv3.DiscoveryResponse) (nack string, repeat bool) {
	var err error
	if resp.GetTypeUrl() != typeURL {
		err = fmt.Errorf("unrequested resource type %q", resp.GetTypeUrl())
	} else {
		var parts []*rules.Set
		parts, err = Convert(resp.GetResources(), resp.GetVersionInfo(), c.opts.DefaultAlgorithm)
		if err == nil {
			err = c.opts.Apply(parts, resp.GetVersionInfo())
		}
	}
	if err == nil {
		c.nacked = ""
		return "", false
	}
	if resp.GetVersionInfo() == c.nacked {
		return nackMessage(err), true // logged already
	}
	c.opts.Log.Error("xds: config rejected (NACK); the previous config keeps serving", "version", resp.GetVersionInfo(), "err", err)
	c.nacked, c.nackWait = resp.GetVersionInfo(), c.opts.BackoffMin
	return nackMessage(err), false
}

// watchedConn is the connection as the ADS client sees it: its streams
// run under ctx (the current stream's, so that ending a stream frees it)
// and the last DiscoveryResponse received is kept in last, for the
// version and type that the ADS client's Response does not carry. Used by
// one stream at a time.
type watchedConn struct {
	cc   grpc.ClientConnInterface
	ctx  context.Context
	last *discoveryv3.DiscoveryResponse
}

var _ grpc.ClientConnInterface = (*watchedConn)(nil)

func (w *watchedConn) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	return w.cc.Invoke(ctx, method, args, reply, opts...)
}

func (w *watchedConn) NewStream(_ context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	s, err := w.cc.NewStream(w.ctx, desc, method, opts...)
	if err != nil {
		return nil, err
	}
	return &watchedStream{ClientStream: s, w: w}, nil
}

// watchedStream records what it receives in its watchedConn.
type watchedStream struct {
	grpc.ClientStream
	w *watchedConn
}

func (s *watchedStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if r, ok := m.(*discoveryv3.DiscoveryResponse); ok && err == nil {
		s.w.last = r
	}
	return err
}

// Refusal is an error Apply may return to NACK a response with a message
// of its own: Message goes to the management server, Err (with local
// detail, such as the paths of this host's config files) to the log.
type Refusal struct {
	Message string
	Err     error
}

func (r *Refusal) Error() string { return r.Err.Error() }

// Unwrap returns r.Err.
func (r *Refusal) Unwrap() error { return r.Err }

// nackMessage is the error_detail text of a NACK for err: a Refusal's
// Message, else err's text (Convert's errors name only resources and
// their fields).
func nackMessage(err error) string {
	if r, ok := errors.AsType[*Refusal](err); ok {
		return r.Message
	}
	return err.Error()
}
