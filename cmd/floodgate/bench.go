package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"time"

	"github.com/spf13/pflag"
	"golang.org/x/term"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/internal/auth"
	"github.com/floodgate/floodgate/internal/loadgen"
)

// benchFlags are the settings of `floodgate bench`.
type benchFlags struct {
	cfg            loadgen.Config // the run's settings; API and Limit are set by loadConfig, Conns by runBench
	api            string
	conns          int
	algorithm      string
	limit          string
	tls            bool
	tlsCA          string
	tlsSkipVerify  bool
	token          string
	json           bool
	printConfig    bool
	connectTimeout time.Duration
	cpuProfile     string
	reportInterval time.Duration // --api rlqs
	strict         bool
}

func (f *benchFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.cfg.Target, "addr", "127.0.0.1:8081", "gRPC address of the floodgate server")
	fs.StringVar(&f.api, "api", "check", "what to send: check (floodgate.v1 Check), rls (Envoy ShouldRateLimit; see --print-config), health (grpc.health.v1: the server's bare gRPC ceiling) or rlqs (Envoy RLQS streams: --concurrency instances × --keys buckets; see --print-config)")
	fs.DurationVar(&f.reportInterval, "report-interval", 0, "rlqs: each instance reports every interval, as Envoy does (0: its next report as soon as the last was answered)")
	fs.IntVar(&f.cfg.Concurrency, "concurrency", 50, "workers, each with one request in flight (closed loop)")
	fs.IntVar(&f.conns, "conns", 1, "gRPC connections; workers are spread over them round-robin")
	fs.DurationVar(&f.cfg.Duration, "duration", 10*time.Second, "how long to measure, after the warmup (0: until --max-requests)")
	fs.DurationVar(&f.cfg.Warmup, "warmup", 2*time.Second, "how long to send before measuring")
	fs.IntVar(&f.cfg.Keys, "keys", 10000, "distinct keys (check, rls)")
	fs.Float64Var(&f.cfg.Zipf, "zipf", 0, "Zipf skew s > 1 for the key choice (key 0 the most frequent); 0 means uniform")
	fs.StringVar(&f.algorithm, "algorithm", algorithms.Default.String(), "algorithm: "+algorithms.Names(algorithms.All(), "or", algorithms.Algorithm.String)+" (check; and in --print-config)")
	fs.StringVar(&f.limit, "limit", "100/1s", "limit per key as REQUESTS/PERIOD, e.g. 100/1s or 10/1m; burst = requests (check; and in --print-config)")
	fs.IntVar(&f.cfg.Descriptors, "descriptors", 1, "rls: descriptors per request, with keys bench_key, bench_key2, ...")
	fs.StringVar(&f.cfg.Domain, "domain", "bench", "rls: the domain")
	fs.BoolVar(&f.tls, "tls", false, "connect with TLS (implied by --tls-ca and --tls-insecure-skip-verify)")
	fs.StringVar(&f.tlsCA, "tls-ca", "", "PEM file of the CA that signed the server's certificate (default: the system roots)")
	fs.BoolVar(&f.tlsSkipVerify, "tls-insecure-skip-verify", false, "TLS without checking the server's certificate (tests only)")
	fs.StringVar(&f.token, "token", "", "send the header authorization: Bearer TOKEN with every request")
	fs.BoolVar(&f.json, "json", false, "print one JSON object (fields documented in internal/loadgen) instead of the text report")
	fs.Uint64Var(&f.cfg.MaxRequests, "max-requests", 0, "stop after this many measured requests (0: no cap)")
	fs.BoolVar(&f.printConfig, "print-config", false, "print the server config --api rls needs (for --domain, --descriptors, --limit, --algorithm) and exit")
	fs.DurationVar(&f.connectTimeout, "connect-timeout", 5*time.Second, "how long to wait for the connections to be ready")
	fs.BoolVar(&f.strict, "strict", false, "exit 1 when the run did not measure what it claims: with --api rls, when no answer carried a limit (the server has no rule for the bench descriptors; without --strict that is a warning)")
	fs.StringVar(&f.cpuProfile, "cpuprofile", "", "write the load generator's own CPU profile (warmup and measurement) to this file, to check that it is not the bottleneck")
}

const benchSynopsis = `Sends requests to a floodgate server in a closed loop (each worker sends its
next request when the previous one was answered) and reports decisions/s,
allowed/denied/errors and latency percentiles with a histogram.

  floodgate bench --api health                 # the server's bare gRPC ceiling
  floodgate bench --api check --limit 100/1s   # Check with an inline limit
  floodgate bench --api rls --print-config > bench.yaml
  floodgate serve --config bench.yaml &
  floodgate bench --api rls`

func runBench(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	var f benchFlags
	fs := newFlagSet("bench [flags]", benchSynopsis, stdout)
	f.register(fs)
	fail := func(format string, args ...any) error {
		fmt.Fprintf(stderr, "floodgate bench: "+format+"\n", args...)
		return exitCode(2)
	}
	// The generator's heap is tiny; collect rarely so it leaves the CPU
	// to the server it measures (the same for every --api, ceiling included).
	setGCPercent(getenv, defaultGCPercent)
	if err := parseCommand(fs, args, getenv, stderr); err != nil {
		return err
	}
	cfg, err := f.loadConfig()
	if err != nil {
		return fail("%v", err)
	}
	if f.printConfig { // every RLQS bucket gets --limit's requests per second
		out := loadgen.RLSConfig(f.cfg.Domain, f.cfg.Descriptors, cfg.Limit)
		if cfg.API == loadgen.APIRLQS {
			out = loadgen.RLQSConfigYAML(f.cfg.Domain, cfg.Limit.Requests)
		}
		_, err := io.WriteString(stdout, out)
		return err
	}
	if cfg.API == loadgen.APIRLQS {
		return f.runRLQS(ctx, stdout, fail)
	}
	if cfg.API != loadgen.APICheck {
		cfg.Limit = algorithms.Limit{}
	}

	ctx, cfg.Conns, err = f.dial(ctx, fail)
	defer closeAll(cfg.Conns)
	if err != nil {
		return err
	}
	tf, tty := stderr.(*os.File) // a terminal, where a progress line rewritten with \r makes sense
	tty = tty && term.IsTerminal(int(tf.Fd()))
	if tty {
		total := f.cfg.Duration
		cfg.Progress = func(p loadgen.Progress) {
			line := p.String()
			if !p.Warmup && total > 0 {
				line += fmt.Sprintf(" (of %s)", total)
			}
			fmt.Fprintf(stderr, "\r%s\x1b[K", line)
		}
	}
	if f.cpuProfile != "" {
		pf, err := os.Create(f.cpuProfile)
		if err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		defer pf.Close()
		if err := pprof.StartCPUProfile(pf); err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	res, err := loadgen.Run(ctx, cfg)
	if tty {
		fmt.Fprint(stderr, "\r\x1b[K")
	}
	if err != nil {
		return err
	}
	if f.json {
		err = res.WriteJSON(stdout)
	} else {
		err = res.WriteText(stdout)
	}
	if err != nil {
		return err
	}
	if res.Requests() > 0 && res.Allowed+res.Denied == 0 {
		return fmt.Errorf("every request failed (%d errors)", res.ErrorCount())
	}
	return f.checkLimited(res, stderr)
}

// checkLimited warns when an rls run's answers carried no limit: the
// server matched no rule for the bench descriptors, so every request was
// "allowed" and the run measured rule lookups, not decisions. Under
// --strict that ends the command with status 1.
func (f *benchFlags) checkLimited(res *loadgen.Result, stderr io.Writer) error {
	if res.Config.API != loadgen.APIRLS || res.Allowed+res.Denied == 0 || res.Limited > 0 {
		return nil
	}
	fmt.Fprintf(stderr, "floodgate bench: warning: none of %d answers carried a limit: the server at %s has no rule for domain %q and the bench descriptors, so every request was allowed unlimited and this measured rule lookups, not decisions; serve the rules of `floodgate bench --api rls --print-config` (with the same --domain, --descriptors and --limit)\n",
		res.Allowed+res.Denied, f.cfg.Target, f.cfg.Domain)
	if f.strict {
		return exitCode(1)
	}
	return nil
}

// loadConfig checks the flags and turns them into a run's config (without
// connections), naming the flag in every error.
func (f *benchFlags) loadConfig() (loadgen.Config, error) {
	api, err := loadgen.ParseAPI(f.api)
	if err != nil {
		return loadgen.Config{}, fmt.Errorf("--api: %w", err)
	}
	alg, err := algorithms.ParseAlgorithm(f.algorithm)
	if err != nil {
		return loadgen.Config{}, fmt.Errorf("--algorithm: %w", err)
	}
	requests, period, err := parseRate(f.limit)
	if err != nil {
		return loadgen.Config{}, fmt.Errorf("--limit: %w", err)
	}
	limit := algorithms.Limit{Algorithm: alg, Requests: requests, Period: period}
	if err := limit.Validate(); err != nil {
		return loadgen.Config{}, fmt.Errorf("--limit %s with --algorithm %s: %w", f.limit, f.algorithm, err)
	}
	switch {
	case f.cfg.Concurrency < 1:
		return loadgen.Config{}, fmt.Errorf("--concurrency must be at least 1, got %d", f.cfg.Concurrency)
	case f.conns < 1:
		return loadgen.Config{}, fmt.Errorf("--conns must be at least 1, got %d", f.conns)
	case f.conns > f.cfg.Concurrency:
		return loadgen.Config{}, fmt.Errorf("--conns (%d) must not exceed --concurrency (%d): a connection without a worker sends nothing", f.conns, f.cfg.Concurrency)
	case f.cfg.Duration < 0:
		return loadgen.Config{}, fmt.Errorf("--duration must not be negative, got %v", f.cfg.Duration)
	case f.cfg.Duration == 0 && f.cfg.MaxRequests == 0:
		return loadgen.Config{}, errors.New("--duration 0 needs --max-requests")
	case f.cfg.Warmup < 0:
		return loadgen.Config{}, fmt.Errorf("--warmup must not be negative, got %v", f.cfg.Warmup)
	case f.cfg.Keys < 1:
		return loadgen.Config{}, fmt.Errorf("--keys must be at least 1, got %d", f.cfg.Keys)
	case f.cfg.Zipf != 0 && !(f.cfg.Zipf > 1):
		return loadgen.Config{}, fmt.Errorf("--zipf must be greater than 1 (or 0 for uniform keys), got %v", f.cfg.Zipf)
	case f.cfg.Descriptors < 1:
		return loadgen.Config{}, fmt.Errorf("--descriptors must be at least 1, got %d", f.cfg.Descriptors)
	case f.cfg.Domain == "":
		return loadgen.Config{}, errors.New("--domain must not be empty")
	case f.reportInterval < 0:
		return loadgen.Config{}, fmt.Errorf("--report-interval must not be negative, got %v", f.reportInterval)
	case api == loadgen.APIRLQS && f.cfg.Duration == 0:
		return loadgen.Config{}, errors.New("--api rlqs needs a positive --duration")
	case f.connectTimeout <= 0:
		return loadgen.Config{}, fmt.Errorf("--connect-timeout must be positive, got %v", f.connectTimeout)
	}
	cfg := f.cfg
	cfg.API, cfg.Limit = api, limit
	return cfg, nil
}

// dial opens --conns connections to --addr with the TLS flags' credentials
// and waits until each is ready; ctx carries --token. A bad flag goes to
// fail. The connections opened are returned with an error too, to be
// closed.
func (f *benchFlags) dial(ctx context.Context, fail func(string, ...any) error) (context.Context, []grpc.ClientConnInterface, error) {
	creds := insecure.NewCredentials()
	if f.tls || f.tlsCA != "" || f.tlsSkipVerify {
		cfg, err := auth.ClientTLS(auth.ClientFiles{CA: f.tlsCA}, auth.ClientFiles{CA: "--tls-ca"})
		if err != nil {
			return ctx, nil, fail("%v", err)
		}
		cfg.InsecureSkipVerify = f.tlsSkipVerify
		creds = credentials.NewTLS(cfg)
	}
	var conns []grpc.ClientConnInterface
	for range f.conns {
		conn, err := grpc.NewClient(f.cfg.Target, grpc.WithTransportCredentials(creds))
		if err != nil {
			return ctx, conns, fail("--addr %q: %v", f.cfg.Target, err)
		}
		conns = append(conns, conn)
		if err := waitReady(ctx, conn, f.connectTimeout); err != nil {
			return ctx, conns, fmt.Errorf("connect to %s: %w", f.cfg.Target, err)
		}
	}
	if f.token != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+f.token)
	}
	return ctx, conns, nil
}

func closeAll(conns []grpc.ClientConnInterface) {
	for _, c := range conns {
		c.(*grpc.ClientConn).Close()
	}
}

// waitReady connects conn and waits until it is ready, so that the run
// does not measure the handshake and an unreachable server is one clear
// error rather than a report full of Unavailable.
func waitReady(ctx context.Context, conn *grpc.ClientConn, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn.Connect()
	for {
		s := conn.GetState()
		if s == connectivity.Ready {
			return nil
		}
		if !conn.WaitForStateChange(ctx, s) {
			// A call that does not wait for readiness fails at once with
			// the last connection error, which says why (refused, TLS...).
			pctx, pcancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
			defer pcancel()
			err := conn.Invoke(pctx, healthpb.Health_Check_FullMethodName, &healthpb.HealthCheckRequest{}, &healthpb.HealthCheckResponse{})
			if err == nil {
				return nil // ready just now
			}
			return fmt.Errorf("not ready after %v (%s): %s", timeout, s, status.Convert(err).Message())
		}
	}
}

// runRLQS is `floodgate bench --api rlqs`: --concurrency simulated Envoy
// instances, each reporting --keys buckets on one stream, over --conns
// connections; it prints assignment latency and reports processed per
// second.
func (f *benchFlags) runRLQS(ctx context.Context, stdout io.Writer, fail func(string, ...any) error) (err error) {
	rc := loadgen.RLQSConfig{Domain: f.cfg.Domain, Streams: f.cfg.Concurrency, Buckets: f.cfg.Keys,
		Interval: f.reportInterval, Duration: f.cfg.Duration, Warmup: f.cfg.Warmup}
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
