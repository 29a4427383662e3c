package main

import (
	"context"
	"fmt"
	"io"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/floodgate/floodgate/internal/loadgen"
)

// runRLQS is `floodgate bench --api rlqs`: --concurrency simulated Envoy
// instances, each reporting --keys buckets on one stream, over --conns
// connections; it prints assignment latency and reports processed per
// second. With --print-config it prints the quota config the run needs
// (every bucket gets --limit's requests per second).
func (f *benchFlags) runRLQS(ctx context.Context, cfg loadgen.Config, stdout io.Writer) error {
	if f.printConfig {
		_, err := io.WriteString(stdout, loadgen.RLQSConfigYAML(f.domain, cfg.Limit.Requests))
		return err
	}
	if f.reportInterval < 0 {
		return fmt.Errorf("--report-interval must not be negative, got %v", f.reportInterval)
	}
	if f.duration <= 0 {
		return fmt.Errorf("--api rlqs needs a positive --duration")
	}
	creds, err := f.credentials()
	if err != nil {
		return err
	}
	rc := loadgen.RLQSConfig{Domain: f.domain, Streams: f.concurrency, Buckets: f.keys,
		Interval: f.reportInterval, Duration: f.duration, Warmup: f.warmup}
	for range f.conns {
		conn, err := grpc.NewClient(f.addr, grpc.WithTransportCredentials(creds))
		if err != nil {
			return fmt.Errorf("--addr %q: %w", f.addr, err)
		}
		defer conn.Close()
		if err := waitReady(ctx, conn, f.connectTimeout); err != nil {
			return fmt.Errorf("connect to %s: %w", f.addr, err)
		}
		rc.Conns = append(rc.Conns, conn)
	}
	if f.token != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+f.token)
	}
	res, err := loadgen.RunRLQS(ctx, rc)
	if err != nil {
		return err
	}
	return res.WriteText(stdout)
}
