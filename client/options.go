package client

import (
	"context"
	"crypto/tls"
	"errors"
	"time"

	"google.golang.org/grpc"
)

// Option configures a Client made by Dial or by New: WithToken and
// WithTimeout. Every Option is also a DialOption.
type Option interface {
	DialOption
	applyCall(*callOptions)
}

// DialOption configures a Client made by Dial: any Option, and WithTLS and
// WithDialOptions, which configure the connection Dial opens. New takes
// only Options, since the connection it is given is configured already:
// passing it WithTLS or WithDialOptions does not compile, rather than
// being dropped.
type DialOption interface {
	applyDial(*dialOptions)
}

// callOptions are the settings of every Client, however made.
type callOptions struct {
	token    string
	tokenSet bool // WithToken was given, perhaps with ""
	timeout  time.Duration
}

// dialOptions are the settings of a Client made by Dial.
type dialOptions struct {
	callOptions
	tls      *tls.Config
	grpcOpts []grpc.DialOption
}

// callOption is an Option: it sets callOptions, for New and Dial alike.
type callOption func(*callOptions)

func (f callOption) applyCall(o *callOptions) { f(o) }
func (f callOption) applyDial(o *dialOptions) { f(&o.callOptions) }

// dialOption is a DialOption that is no Option: it configures Dial's
// connection.
type dialOption func(*dialOptions)

func (f dialOption) applyDial(o *dialOptions) { f(o) }

// WithTLS makes Dial use TLS with cfg (give cfg.Certificates for mTLS).
// Without it the connection is plaintext, which suits a floodgate on
// loopback or a sidecar; anything crossing a network should use TLS.
func WithTLS(cfg *tls.Config) DialOption {
	return dialOption(func(o *dialOptions) { o.tls = cfg })
}

// WithDialOptions appends gRPC dial options (interceptors, keepalive, a
// custom dialer) to the ones Dial sets.
func WithDialOptions(opts ...grpc.DialOption) DialOption {
	return dialOption(func(o *dialOptions) { o.grpcOpts = append(o.grpcOpts, opts...) })
}

// WithToken sends "authorization: Bearer token" on every call, with Dial or
// New. Dial refuses a token over plaintext unless addr is a loopback
// address or a unix socket, so a secret never crosses a network in the
// clear; with New, gRPC itself refuses to send it over a plaintext conn
// whose target is not loopback. An empty token is an error, not "no
// token": leave the option out instead.
func WithToken(token string) Option {
	return callOption(func(o *callOptions) { o.token, o.tokenSet = token, true })
}

// WithTimeout bounds each call (default DefaultTimeout). A context with an
// earlier deadline wins. d <= 0 means no bound beyond the context's.
func WithTimeout(d time.Duration) Option {
	return callOption(func(o *callOptions) { o.timeout = d })
}

// newDialOptions applies opts over the defaults.
func newDialOptions(opts []DialOption) (dialOptions, error) {
	o := dialOptions{callOptions: callOptions{timeout: DefaultTimeout}}
	for _, opt := range opts {
		if opt != nil {
			opt.applyDial(&o)
		}
	}
	return o, o.validate()
}

// newCallOptions applies opts over the defaults.
func newCallOptions(opts []Option) (callOptions, error) {
	o := callOptions{timeout: DefaultTimeout}
	for _, opt := range opts {
		if opt != nil {
			opt.applyCall(&o)
		}
	}
	return o, o.validate()
}

func (o callOptions) validate() error {
	if o.tokenSet && o.token == "" {
		return errors.New("floodgate client: WithToken with an empty token; leave the option out to send none")
	}
	return nil
}

// bearer sends a bearer token with every call.
type bearer struct {
	token  string
	secure bool
}

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + b.token}, nil
}

func (b bearer) RequireTransportSecurity() bool { return b.secure }
