package main

import (
	"context"
	"io"

	"github.com/floodgate/floodgate/internal/loadgen"
)

// runRLQS is `floodgate bench --api rlqs`: --concurrency simulated Envoy
// instances, each reporting --keys buckets on one stream, over --conns
// connections; it prints assignment latency and reports processed per
// second. With --print-config it prints the quota config the run needs
// (every bucket gets --limit's requests per second).
func (f *benchFlags) runRLQS(ctx context.Context, cfg loadgen.Config, stdout io.Writer, fail func(string, ...any) error) (err error) {
	if f.printConfig {
		_, err := io.WriteString(stdout, loadgen.RLQSConfigYAML(f.domain, cfg.Limit.Requests))
		return err
	}
	rc := loadgen.RLQSConfig{Domain: f.domain, Streams: f.concurrency, Buckets: f.keys,
		Interval: f.reportInterval, Duration: f.duration, Warmup: f.warmup}
	ctx, rc.Conns, err = f.dial(ctx, fail)
	defer closeAll(rc.Conns)
	if err != nil {
		return err
	}
	res, err := loadgen.RunRLQS(ctx, rc)
	if err != nil {
		return err
	}
	return res.WriteText(stdout)
}
