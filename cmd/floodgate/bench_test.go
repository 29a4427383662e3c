package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/floodgate/floodgate/internal/loadgen"
	"github.com/floodgate/floodgate/internal/rules"
	"github.com/floodgate/floodgate/server"
	"github.com/floodgate/floodgate/store/memstore"
)

type benchConfigSource struct{ c *rules.Set }

func (s benchConfigSource) Current() *rules.Set { return s.c }

// benchServer runs an in-process floodgate server (embedded store) on a
// loopback port and returns its address. cfgYAML, when not empty, is its
// rules.
func benchServer(t *testing.T, cfgYAML string, s server.GRPCSettings) string {
	t.Helper()
	var src server.RuleSource
	if cfgYAML != "" {
		cfg, err := rules.Parse("bench.yaml", []byte(cfgYAML))
		if err != nil {
			t.Fatal(err)
		}
		src = benchConfigSource{cfg}
	}
	st := memstore.New(memstore.Config{})
	t.Cleanup(func() { st.Close() })
	srv, _ := server.NewGRPCServer(
		server.NewRateLimiter(st, server.CheckSettings{Settings: server.Settings{Rules: src}}),
		server.NewEnvoy(st, server.EnvoySettings{Settings: server.Settings{Rules: src}}), s)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

func noEnv(string) string { return "" }

// runBenchCmd runs `floodgate args...` and returns its stdout and stderr.
func runBenchCmd(t *testing.T, getenv func(string) string, args ...string) (string, string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	err := run(t.Context(), args, getenv, &stdout, &stderr)
	return stdout.String(), stderr.String(), err
}

// decodeReport parses --json output strictly into the documented schema.
func decodeReport(t *testing.T, out string) loadgen.Report {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	var rep loadgen.Report
	if err := dec.Decode(&rep); err != nil {
		t.Fatalf("--json output does not parse as loadgen.Report: %v\n%s", err, out)
	}
	if dec.More() {
		t.Fatalf("--json printed more than one object:\n%s", out)
	}
	return rep
}

func checkReport(t *testing.T, rep loadgen.Report) {
	t.Helper()
	if rep.Requests == 0 || rep.RequestsPerSec <= 0 || rep.DecisionsPerS <= 0 || rep.ElapsedSeconds <= 0 {
		t.Fatalf("nothing measured: %+v", rep)
	}
	if rep.Allowed+rep.Denied+rep.Errors != rep.Requests {
		t.Fatalf("allowed %d + denied %d + errors %d != requests %d", rep.Allowed, rep.Denied, rep.Errors, rep.Requests)
	}
	var byCode uint64
	for _, n := range rep.ErrorsByCode {
		byCode += n
	}
	if byCode != rep.Errors {
		t.Fatalf("errors_by_code %v sums to %d, errors %d", rep.ErrorsByCode, byCode, rep.Errors)
	}
	l := rep.LatencyUs
	if !(0 < l.Min && l.Min <= l.P50 && l.P50 <= l.P90 && l.P90 <= l.P99 && l.P99 <= l.P999 && l.P999 <= l.Max) {
		t.Fatalf("latencies not ordered: %+v", l)
	}
	var binned uint64
	for _, b := range rep.Histogram {
		binned += b.Count
	}
	if binned != rep.Requests {
		t.Fatalf("histogram holds %d requests, want %d", binned, rep.Requests)
	}
}

func TestBenchEachAPI(t *testing.T) {
	printConfig := func(limit string, descriptors string) string {
		out, _, err := runBenchCmd(t, noEnv, "bench", "--print-config", "--limit", limit, "--descriptors", descriptors)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	cases := []struct {
		name       string
		serverCfg  string
		args       []string
		wantDenied bool // most requests denied; else none
	}{
		{"health", "", []string{"--api", "health"}, false},
		{"check huge limit", "", []string{"--api", "check", "--limit", "1000000000/1s", "--keys", "50"}, false},
		{"check tiny limit", "", []string{"--api", "check", "--limit", "1/1h", "--keys", "2"}, true},
		{"check zipf sliding window", "", []string{"--api", "check", "--limit", "1000000/1m", "--algorithm", "sliding_window", "--zipf", "1.1"}, false},
		{"rls huge limit", printConfig("1000000000/1s", "1"), []string{"--api", "rls"}, false},
		{"rls tiny limit, 3 descriptors", printConfig("1/1h", "3"), []string{"--api", "rls", "--descriptors", "3", "--keys", "3"}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			addr := benchServer(t, tc.serverCfg, server.GRPCSettings{})
			args := append([]string{"bench", "--addr", addr, "--duration", "1s", "--warmup", "100ms", "--concurrency", "6", "--conns", "2", "--json"}, tc.args...)
			out, stderr, err := runBenchCmd(t, noEnv, args...)
			if err != nil {
				t.Fatalf("%v\n%s", err, stderr)
			}
			if stderr != "" {
				t.Errorf("stderr is not a terminal, yet got %q", stderr)
			}
			rep := decodeReport(t, out)
			checkReport(t, rep)
			if rep.Errors != 0 {
				t.Fatalf("errors: %v", rep.ErrorsByCode)
			}
			if tc.wantDenied && rep.Denied <= rep.Allowed {
				t.Fatalf("allowed %d, denied %d: want most denied", rep.Allowed, rep.Denied)
			}
			if !tc.wantDenied && rep.Denied != 0 {
				t.Fatalf("allowed %d, denied %d: want none denied", rep.Allowed, rep.Denied)
			}
			if rep.Target != addr || rep.Concurrency != 6 || rep.Conns != 2 || rep.WarmupSeconds != 0.1 {
				t.Fatalf("report settings: %+v", rep)
			}
		})
	}
}

func TestBenchTextReportAndEnv(t *testing.T) {
	addr := benchServer(t, "", server.GRPCSettings{})
	env := map[string]string{"FLOODGATE_ADDR": addr, "FLOODGATE_API": "check", "FLOODGATE_LIMIT": "5/1h", "FLOODGATE_KEYS": "4"}
	out, stderr, err := runBenchCmd(t, func(k string) string { return env[k] },
		"bench", "--max-requests", "100", "--duration", "0", "--warmup", "0", "--concurrency", "3")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	// 4 keys at 5 per hour, no warmup: exactly 20 of 100 admitted.
	for _, want := range []string{"api=check target=" + addr, "keys=4 (uniform)", "limit=5/1h token_bucket",
		"requests            100", "  allowed            20", "  denied             80", "p99.9", "latency histogram"} {
		if !strings.Contains(out, want) {
			t.Errorf("text report lacks %q:\n%s", want, out)
		}
	}
}

func TestBenchPrintConfig(t *testing.T) {
	out, _, err := runBenchCmd(t, noEnv, "bench", "--print-config", "--domain", "edge", "--descriptors", "2", "--limit", "10/1m", "--algorithm", "sliding_window")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := rules.Parse("bench.yaml", []byte(out))
	if err != nil {
		t.Fatalf("printed config does not load: %v\n%s", err, out)
	}
	for _, key := range []string{"bench_key", "bench_key2"} {
		ls := cfg.Match("edge", []rules.Entry{{Key: key, Value: "bench:1"}})
		if len(ls) != 1 || ls[0].Rate.Requests != 10 || ls[0].Rate.Period != time.Minute || ls[0].Rate.Algorithm.String() != "sliding_window" {
			t.Fatalf("%s matched %+v", key, ls)
		}
	}
}

func TestBenchToken(t *testing.T) {
	requireToken := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		if v := md.Get("authorization"); len(v) != 1 || v[0] != "Bearer s3cret" {
			return nil, status.Error(codes.Unauthenticated, "bad token")
		}
		return h(ctx, req)
	}
	addr := benchServer(t, "", server.GRPCSettings{UnaryInterceptors: []grpc.UnaryServerInterceptor{requireToken}})
	base := []string{"bench", "--addr", addr, "--api", "health", "--max-requests", "30", "--duration", "0", "--warmup", "0", "--concurrency", "2", "--json"}

	out, stderr, err := runBenchCmd(t, noEnv, append(base, "--token", "s3cret")...)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if rep := decodeReport(t, out); rep.Allowed != 30 {
		t.Fatalf("with the token: %+v", rep)
	}

	out, _, err = runBenchCmd(t, noEnv, base...)
	if err == nil || !strings.Contains(err.Error(), "every request failed") {
		t.Fatalf("without the token: err = %v, want every request failed", err)
	}
	if rep := decodeReport(t, out); rep.Errors != 30 || rep.ErrorsByCode["Unauthenticated"] != 30 {
		t.Fatalf("without the token: %+v", rep)
	}
}

// selfSigned writes a certificate for 127.0.0.1 and returns the server's
// TLS config and the PEM file's path.
func selfSigned(t *testing.T) (*tls.Config, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "floodgate bench test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}, path
}

func TestBenchTLS(t *testing.T) {
	tlsCfg, caPath := selfSigned(t)
	addr := benchServer(t, "", server.GRPCSettings{ServerOptions: []grpc.ServerOption{grpc.Creds(credentials.NewTLS(tlsCfg))}})
	base := []string{"bench", "--addr", addr, "--api", "health", "--max-requests", "20", "--duration", "0", "--warmup", "0", "--concurrency", "2", "--json", "--connect-timeout", "2s"}
	for _, extra := range [][]string{{"--tls-ca", caPath}, {"--tls", "--tls-ca", caPath}, {"--tls-insecure-skip-verify"}} {
		out, stderr, err := runBenchCmd(t, noEnv, append(base, extra...)...)
		if err != nil {
			t.Fatalf("%v: %v\n%s", extra, err, stderr)
		}
		if rep := decodeReport(t, out); rep.Allowed != 20 {
			t.Fatalf("%v: %+v", extra, rep)
		}
	}
	// Without TLS, or without trusting the certificate, nothing connects.
	for _, extra := range [][]string{nil, {"--tls"}} {
		_, _, err := runBenchCmd(t, noEnv, append(append(base, extra...), "--connect-timeout", "300ms")...)
		if err == nil || !strings.Contains(err.Error(), "connect to "+addr) {
			t.Fatalf("%v: err = %v, want a connect error", extra, err)
		}
	}
}

func TestBenchUnreachable(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	_, _, err = runBenchCmd(t, noEnv, "bench", "--addr", addr, "--api", "health", "--connect-timeout", "300ms")
	if err == nil || !strings.Contains(err.Error(), "connect to "+addr) {
		t.Fatalf("err = %v, want a connect error naming %s", err, addr)
	}
}

func TestBenchCancel(t *testing.T) {
	addr := benchServer(t, "", server.GRPCSettings{})
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	var stdout, stderr bytes.Buffer
	err := run(ctx, []string{"bench", "--addr", addr, "--api", "health", "--duration", "1h", "--warmup", "0", "--json"}, noEnv, &stdout, &stderr)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	if rep := decodeReport(t, stdout.String()); !rep.Interrupted || rep.Requests == 0 || rep.Errors != 0 {
		t.Fatalf("after cancel: %+v", rep)
	}
}

func TestBenchBadFlags(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--limit", "100"}, "--limit: want REQUESTS/PERIOD"},
		{[]string{"--limit", "10/1500us"}, "--limit 10/1500us with --algorithm"},
		{[]string{"--limit", "0/1s"}, "requests must be a positive integer"},
		{[]string{"--limit", "10/banana"}, "period must be a positive duration"},
		{[]string{"--limit", "20000/1s", "--algorithm", "sliding_window_log"}, "--limit 20000/1s with --algorithm sliding_window_log"},
		{[]string{"--api", "grpc"}, "--api: unknown api \"grpc\" (want check, rls, health or rlqs)"},
		{[]string{"--algorithm", "leaky"}, "--algorithm: unknown algorithm \"leaky\""},
		{[]string{"--concurrency", "0"}, "--concurrency must be at least 1, got 0"},
		{[]string{"--conns", "0"}, "--conns must be at least 1, got 0"},
		{[]string{"--conns", "60"}, "--conns (60) must not exceed --concurrency (50)"},
		{[]string{"--keys", "0"}, "--keys must be at least 1"},
		{[]string{"--zipf", "0.5"}, "--zipf must be greater than 1"},
		{[]string{"--descriptors", "0"}, "--descriptors must be at least 1"},
		{[]string{"--duration", "0"}, "--duration 0 needs --max-requests"},
		{[]string{"--warmup", "-1s"}, "--warmup must not be negative"},
		{[]string{"--domain", ""}, "--domain must not be empty"},
		{[]string{"--concurrency", "many"}, `--concurrency "many": want an integer`},
		{[]string{"--tls-ca", "/nonexistent/ca.pem"}, "--tls-ca: open /nonexistent/ca.pem"},
		{[]string{"extra"}, "unexpected argument \"extra\""},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			// No server: every case must fail before connecting.
			_, stderr, err := runBenchCmd(t, noEnv, append([]string{"bench", "--addr", "127.0.0.1:1"}, tc.args...)...)
			var ec exitCode
			if !errors.As(err, &ec) || ec != 2 {
				t.Fatalf("err = %v, want exit status 2", err)
			}
			if !strings.Contains(stderr, tc.want) {
				t.Fatalf("stderr = %q, want it to contain %q", stderr, tc.want)
			}
		})
	}
	// A bad environment variable is named.
	_, stderr, err := runBenchCmd(t, func(k string) string {
		if k == "FLOODGATE_CONCURRENCY" {
			return "x"
		}
		return ""
	}, "bench")
	if err == nil || !strings.Contains(stderr, "$FLOODGATE_CONCURRENCY") {
		t.Fatalf("err = %v, stderr = %q, want the variable named", err, stderr)
	}
}

// TestBenchRLSWithoutRules: --api rls against a server without the bench
// rules answers every request OK with no limit; bench says so (rather
// than report "100% allowed" as if it had measured decisions), and --strict
// makes that exit 1. With the rules, or on --api check, no warning.
func TestBenchRLSWithoutRules(t *testing.T) {
	rulesOut, _, err := runBenchCmd(t, noEnv, "bench", "--print-config", "--limit", "1000000000/1s")
	if err != nil {
		t.Fatal(err)
	}
	bare := benchServer(t, "", server.GRPCSettings{})
	withRules := benchServer(t, rulesOut, server.GRPCSettings{})
	otherDomain := benchServer(t, strings.Replace(rulesOut, `domain: "bench"`, `domain: "other"`, 1), server.GRPCSettings{})
	for _, tc := range []struct {
		name     string
		addr     string
		args     []string
		wantWarn bool
	}{
		{"no rules", bare, []string{"--api", "rls"}, true},
		{"no rules, strict", bare, []string{"--api", "rls", "--strict"}, true},
		{"another domain's rules, strict", otherDomain, []string{"--api", "rls", "--strict"}, true},
		{"the bench rules, strict", withRules, []string{"--api", "rls", "--strict"}, false},
		{"check, strict", bare, []string{"--api", "check", "--strict"}, false},
		{"health, strict", bare, []string{"--api", "health", "--strict"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"bench", "--addr", tc.addr, "--duration", "0", "--max-requests", "200", "--warmup", "0s", "--concurrency", "2", "--json"}, tc.args...)
			out, stderr, err := runBenchCmd(t, noEnv, args...)
			strict := slices.Contains(tc.args, "--strict")
			var ec exitCode
			switch {
			case tc.wantWarn && strict && (!errors.As(err, &ec) || ec != 1):
				t.Errorf("err %v, want exit status 1", err)
			case (!tc.wantWarn || !strict) && err != nil:
				t.Errorf("err %v, want none", err)
			}
			if warned := strings.Contains(stderr, "carried a limit"); warned != tc.wantWarn {
				t.Errorf("warned %v, want %v: %q", warned, tc.wantWarn, stderr)
			}
			if tc.wantWarn && (!strings.Contains(stderr, "--print-config") || !strings.Contains(stderr, `"bench"`)) {
				t.Errorf("the warning does not name the domain and the fix: %q", stderr)
			}
			checkReport(t, decodeReport(t, out)) // the report is written either way
		})
	}
}

// TestCheckLimited pins where the no-limit warning starts: an rls run
// warns only when not one answer carried a limit (a single limited answer
// means the server matched a rule, at least for some requests), never for
// the other APIs or a run without decisions; --strict turns the warning
// into status 1.
func TestCheckLimited(t *testing.T) {
	for _, tc := range []struct {
		name             string
		api              loadgen.API
		allowed, denied  uint64
		limited          uint64
		strict, wantWarn bool
	}{
		{"rls, none limited", loadgen.APIRLS, 9, 0, 0, false, true},
		{"rls, none limited, strict", loadgen.APIRLS, 9, 0, 0, true, true},
		{"rls, denied only, none limited", loadgen.APIRLS, 0, 3, 0, true, true},
		{"rls, one limited", loadgen.APIRLS, 9, 0, 1, true, false},
		{"rls, two limited", loadgen.APIRLS, 1, 1, 2, true, false},
		{"rls, no decisions", loadgen.APIRLS, 0, 0, 0, true, false},
		{"check, none limited", loadgen.APICheck, 9, 0, 0, true, false},
		{"health", loadgen.APIHealth, 9, 0, 0, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &benchFlags{cfg: loadgen.Config{Target: "127.0.0.1:1", Domain: "bench"}, strict: tc.strict}
			res := &loadgen.Result{Config: loadgen.Config{API: tc.api}, Allowed: tc.allowed, Denied: tc.denied, Limited: tc.limited}
			var stderr bytes.Buffer
			err := f.checkLimited(res, &stderr)
			if warned := strings.Contains(stderr.String(), "none of "); warned != tc.wantWarn {
				t.Errorf("warned %v, want %v: %q", warned, tc.wantWarn, stderr.String())
			}
			var ec exitCode
			switch {
			case tc.wantWarn && tc.strict && (!errors.As(err, &ec) || ec != 1):
				t.Errorf("err %v, want exit status 1", err)
			case (!tc.wantWarn || !tc.strict) && err != nil:
				t.Errorf("err %v, want none", err)
			}
			if tc.wantWarn && !strings.Contains(stderr.String(), fmt.Sprintf("none of %d answers", tc.allowed+tc.denied)) {
				t.Errorf("the warning does not count the answers: %q", stderr.String())
			}
		})
	}
}
