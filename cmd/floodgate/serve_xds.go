package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/spf13/pflag"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/internal/auth"
	"github.com/floodgate/floodgate/internal/rules"
	"github.com/floodgate/floodgate/internal/xdsrules"
)

// xdsFlags are serve's settings for rules from an xDS management server.
type xdsFlags struct {
	opts     xdsrules.Options // Apply, Log and TLS are set by client
	tlsFiles auth.ClientFiles
	tls      bool
}

func (x *xdsFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&x.opts.Server, "config-xds-server", "", "xDS: management server HOST:PORT to take rules from (RateLimitConfig resources over ADS, state of the world), beside --config; empty: off (docs/xds.md)")
	fs.StringVar(&x.opts.NodeID, "config-xds-node-id", "", "xDS: this server's node id (default: the host name)")
	fs.BoolVar(&x.tls, "config-xds-tls", false, "xDS: connect with TLS, verified by the system roots (implied by --config-xds-tls-ca)")
	fs.StringVar(&x.tlsFiles.CA, "config-xds-tls-ca", "", "xDS TLS: PEM file of the CA that signed the management server's certificate")
	fs.StringVar(&x.tlsFiles.Cert, "config-xds-tls-cert", "", "xDS TLS: client certificate file (PEM), when the management server asks for one")
	fs.StringVar(&x.tlsFiles.Key, "config-xds-tls-key", "", "xDS TLS: the client certificate's key file (PEM)")
	fs.DurationVar(&x.opts.BackoffMin, "config-xds-backoff-min", xdsrules.DefaultBackoffMin, "xDS: first wait before reconnecting to the management server; doubles per failed attempt")
	fs.DurationVar(&x.opts.BackoffMax, "config-xds-backoff-max", xdsrules.DefaultBackoffMax, "xDS: longest wait before reconnecting")
	fs.StringVar(&x.opts.DefaultAlgorithm, "config-xds-algorithm", "", "xDS: algorithm of every xDS limit ("+algorithms.Names(algorithms.All(), "or", algorithms.Algorithm.String)+"); empty: "+algorithms.Compatible.String()+" as in envoyproxy/ratelimit")
}

// client checks the flags and returns the xDS client that calls apply,
// or nil when --config-xds-server is not set.
func (x *xdsFlags) client(apply func([]*rules.Set, string) error, log *slog.Logger) (*xdsrules.Client, error) {
	if x.opts.Server == "" {
		return nil, nil
	}
	if x.opts.DefaultAlgorithm != "" {
		if _, err := algorithms.ParseAlgorithm(x.opts.DefaultAlgorithm); err != nil {
			return nil, fmt.Errorf("--config-xds-algorithm: %w", err)
		}
	}
	if x.opts.BackoffMin <= 0 || x.opts.BackoffMax < x.opts.BackoffMin {
		return nil, errors.New("--config-xds-backoff-min must be positive and at most --config-xds-backoff-max")
	}
	o := x.opts
	o.Apply, o.Log = apply, log
	if o.NodeID == "" {
		host, err := os.Hostname()
		if err != nil {
			return nil, fmt.Errorf("--config-xds-node-id: no host name to default to: %w", err)
		}
		o.NodeID = host
	}
	if x.tls || x.tlsFiles != (auth.ClientFiles{}) {
		cfg, err := auth.ClientTLS(x.tlsFiles,
			auth.ClientFiles{CA: "--config-xds-tls-ca", Cert: "--config-xds-tls-cert", Key: "--config-xds-tls-key"})
		if err != nil {
			return nil, err
		}
		o.TLS = cfg
	}
	return xdsrules.New(o)
}

// startXDS starts the xDS client of the --xds-* flags, if any, feeding
// live until ctx ends; the returned func waits for it to stop. Serving does not wait for
// the management server: until it answers, its domains are unknown.
func (e serveEnv) startXDS(ctx context.Context, live *xdsrules.Live) (func(), error) {
	x, metrics, log := &e.f.xds, e.metrics, e.log
	apply := func(parts []*rules.Set, version string) error {
		retried, err := live.SetXDS(parts)
		metrics.ObserveConfigReload(err)
		if err != nil {
			return err
		}
		domains := 0
		for _, p := range parts {
			domains += len(p.Domains())
		}
		log.Info("xds config loaded", "version", version, "resources", len(parts), "domains", domains)
		if retried {
			log.Info("config loaded: the files' reload refused earlier applies now", "digest", live.Current().Digest())
		}
		return nil
	}
	c, err := x.client(apply, log)
	if err != nil || c == nil {
		return func() {}, err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Run(ctx)
	}()
	return func() { <-done }, nil
}
