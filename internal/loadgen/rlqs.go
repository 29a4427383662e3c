package loadgen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"
)

// rlqsBucketKey is the bucket id key of --api rlqs: instance i reports the
// buckets {bench_bucket: "0"} to {bench_bucket: "B-1"}, the same ids on
// every instance, so every bucket's budget is shared by all instances.
const rlqsBucketKey = "bench_bucket"

// RLQSConfig is the config of an RLQS run: Streams simulated Envoy
// instances, each reporting Buckets buckets every Interval (0: as soon as
// the previous report was answered).
type RLQSConfig struct {
	Conns    []grpc.ClientConnInterface
	Domain   string
	Streams  int
	Buckets  int
	Interval time.Duration
	Duration time.Duration
	Warmup   time.Duration
}

// RLQSResult is what an RLQS run measured (after the warmup).
type RLQSResult struct {
	Streams, Buckets int
	Elapsed          time.Duration
	// Messages are the reports messages answered; Reports the bucket
	// usage reports in them (Messages × Buckets).
	Messages, Reports uint64
	// Latency is from sending a message to the first response carrying
	// an assignment for each of its buckets.
	Latency Histogram
	// Errors counts streams that ended with an error.
	Errors uint64
	// FirstError is the first of them.
	FirstError error
}

// RLQSConfigYAML is the server config an RLQS run needs: every bucket of
// domain gets budget requests per second.
func RLQSConfigYAML(domain string, budget int64) string {
	return fmt.Sprintf("domain: %s\nquota_buckets:\n  - bucket_id: {%s: \"*\"}\n    rate_limit: {unit: second, requests_per_unit: %d}\n",
		strconv.Quote(domain), rlqsBucketKey, budget)
}

// RunRLQS runs cfg until its warmup and duration have passed or ctx ends.
func RunRLQS(ctx context.Context, cfg RLQSConfig) (*RLQSResult, error) {
	switch {
	case len(cfg.Conns) == 0:
		return nil, errors.New("invalid load config: no connections")
	case cfg.Streams < 1 || cfg.Buckets < 1:
		return nil, errors.New("invalid load config: streams and buckets must be at least 1")
	case cfg.Domain == "":
		return nil, errors.New("invalid load config: empty domain")
	case cfg.Duration <= 0 || cfg.Warmup < 0 || cfg.Interval < 0:
		return nil, errors.New("invalid load config: duration must be positive, warmup and interval not negative")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var measuring atomic.Bool
	res := &RLQSResult{Streams: cfg.Streams, Buckets: cfg.Buckets}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range cfg.Streams {
		wg.Go(func() {
			var h Histogram
			msgs, err := rlqsStream(ctx, cfg, cfg.Conns[i%len(cfg.Conns)], &measuring, &h)
			mu.Lock()
			defer mu.Unlock()
			res.Latency.Merge(&h)
			res.Messages += msgs
			if err != nil && ctx.Err() == nil {
				res.Errors++
				if res.FirstError == nil {
					res.FirstError = err
				}
			}
		})
	}
	select {
	case <-time.After(cfg.Warmup):
	case <-ctx.Done():
	}
	measuring.Store(true)
	start := time.Now()
	select {
	case <-time.After(cfg.Duration):
	case <-ctx.Done():
	}
	res.Elapsed = time.Since(start)
	measuring.Store(false)
	cancel()
	wg.Wait()
	res.Reports = res.Messages * uint64(cfg.Buckets)
	if res.Messages == 0 && res.FirstError != nil {
		return res, res.FirstError
	}
	return res, nil
}

// rlqsStream is one simulated Envoy instance: it reports its buckets and
// waits for their assignments, until ctx ends.
func rlqsStream(ctx context.Context, cfg RLQSConfig, conn grpc.ClientConnInterface, measuring *atomic.Bool, h *Histogram) (uint64, error) {
	s, err := rlqsv3.NewRateLimitQuotaServiceClient(conn).StreamRateLimitQuotas(ctx)
	if err != nil {
		return 0, err
	}
	usages := make([]*rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage, cfg.Buckets)
	for b := range usages {
		usages[b] = &rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{
			BucketId:           &rlqsv3.BucketId{Bucket: map[string]string{rlqsBucketKey: strconv.Itoa(b)}},
			NumRequestsAllowed: 10, TimeElapsed: durationpb.New(max(cfg.Interval, time.Second)),
		}
	}
	msg := &rlqsv3.RateLimitQuotaUsageReports{Domain: cfg.Domain, BucketQuotaUsages: usages}
	var n uint64
	next := time.Now()
	for {
		sent := time.Now()
		if err := s.Send(msg); err != nil {
			return n, streamErr(s, err)
		}
		msg.Domain = "" // the first message only
		// Wait for an assignment of every bucket (pushes for some of them
		// may come first).
		seen := make(map[string]bool, cfg.Buckets)
		for len(seen) < cfg.Buckets {
			r, err := s.Recv()
			if err != nil {
				return n, err
			}
			for _, a := range r.GetBucketAction() {
				seen[a.GetBucketId().GetBucket()[rlqsBucketKey]] = true
			}
		}
		if measuring.Load() {
			h.Record(time.Since(sent))
			n++
		}
		if cfg.Interval > 0 {
			next = next.Add(cfg.Interval)
			select {
			case <-time.After(time.Until(next)):
			case <-ctx.Done():
			}
		}
		if ctx.Err() != nil {
			return n, nil
		}
	}
}

// streamErr is the status the stream ended with, when Send failed because
// it ended.
func streamErr(s rlqsv3.RateLimitQuotaService_StreamRateLimitQuotasClient, err error) error {
	if !errors.Is(err, io.EOF) {
		return err
	}
	for {
		if _, rerr := s.Recv(); rerr != nil {
			return rerr
		}
	}
}

// WriteText prints the result.
func (r *RLQSResult) WriteText(w io.Writer) error {
	var b strings.Builder
	secs := r.Elapsed.Seconds()
	fmt.Fprintf(&b, "streams %d × buckets %d, measured %s\n", r.Streams, r.Buckets, fmtDur(r.Elapsed))
	if secs > 0 {
		fmt.Fprintf(&b, "reports processed: %d (%.0f/s), messages answered: %d (%.1f/s)\n", r.Reports, float64(r.Reports)/secs, r.Messages, float64(r.Messages)/secs)
	}
	if r.Latency.Count() > 0 {
		fmt.Fprintf(&b, "assignment latency: p50 %s  p90 %s  p99 %s  max %s\n",
			fmtDur(r.Latency.Quantile(0.5)), fmtDur(r.Latency.Quantile(0.9)), fmtDur(r.Latency.Quantile(0.99)), fmtDur(r.Latency.Max()))
	}
	fmt.Fprintf(&b, "stream errors: %d", r.Errors)
	if r.FirstError != nil {
		fmt.Fprintf(&b, " (first: %v)", r.FirstError)
	}
	b.WriteByte('\n')
	_, err := io.WriteString(w, b.String())
	return err
}
