package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	rlcommonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/spf13/pflag"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/floodgate/floodgate/internal/hostcheck"
	"github.com/floodgate/floodgate/internal/simulate"
)

// envoyFlags are check's flags for Envoy's API: a ShouldRateLimit request
// of --domain with one descriptor per --descriptor.
type envoyFlags struct {
	domain      string
	descriptors []string
	hits        uint32
}

func (f *envoyFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.domain, "domain", "", "ask Envoy's API (ShouldRateLimit) instead of Check: the request's domain, with --descriptor")
	fs.StringArrayVar(&f.descriptors, "descriptor", nil, "with --domain: a descriptor as KEY=VALUE[,KEY=VALUE...]; repeat for a request of several")
	fs.Uint32Var(&f.hits, "hits", 1, "with --domain: the request's hits_addend, what each attempt spends on every descriptor")
}

// envoyRequest checks the flags of the Envoy form and builds its request.
// The Check form's flags do not apply to it.
func (f *checkFlags) envoyRequest(fs *pflag.FlagSet) (*rlsv3.RateLimitRequest, error) {
	for name, set := range map[string]bool{"key": f.key != "", "limit": f.limit != "", "policy": f.policy != "",
		"algorithm": f.algorithm != "", "burst": f.burst != 0, "time-zone": f.timeZone != "", "cost": fs.Changed("cost")} {
		if set {
			return nil, fmt.Errorf("--%s is for Check requests (--key); --domain asks ShouldRateLimit, whose limits come from the server's rules", name)
		}
	}
	switch {
	case len(f.envoy.descriptors) == 0:
		return nil, errors.New("--domain needs at least one --descriptor KEY=VALUE[,KEY=VALUE...]")
	case f.envoy.hits == 0:
		return nil, errors.New("--hits must be at least 1")
	}
	if err := f.attempts(); err != nil {
		return nil, err
	}
	req := &rlsv3.RateLimitRequest{Domain: f.envoy.domain, HitsAddend: f.envoy.hits}
	descs, err := parseDescriptors(f.envoy.descriptors)
	if err != nil {
		return nil, fmt.Errorf("--descriptor %v", err)
	}
	for _, d := range descs {
		desc := &rlcommonv3.RateLimitDescriptor{}
		for _, e := range d {
			desc.Entries = append(desc.Entries, &rlcommonv3.RateLimitDescriptor_Entry{Key: e.Key, Value: e.Value})
		}
		req.Descriptors = append(req.Descriptors, desc)
	}
	return req, nil
}

// dialEnvoy connects to --addr with check's TLS and token flags. A token
// needs TLS unless --addr is a loopback address, as with Check.
func (f *checkFlags) dialEnvoy() (*grpc.ClientConn, error) {
	creds := insecure.NewCredentials()
	tlsOn := f.tlsOn()
	if tlsOn {
		cfg, err := f.tlsConfig()
		if err != nil {
			return nil, err
		}
		creds = credentials.NewTLS(cfg)
	}
	if f.token != "" && !tlsOn && !hostcheck.LoopbackTarget(f.addr) {
		return nil, fmt.Errorf("--token needs --tls unless --addr %q is a loopback address", f.addr)
	}
	return grpc.NewClient(f.addr, grpc.WithTransportCredentials(creds))
}

// runCheckEnvoy asks ShouldRateLimit --repeat times and prints each
// answer: its overall code and one row per descriptor status (one JSON
// object per answer with --json, Envoy's own field names).
func runCheckEnvoy(ctx context.Context, f *checkFlags, req *rlsv3.RateLimitRequest, stdout, stderr io.Writer) error {
	conn, err := f.dialEnvoy()
	if err != nil {
		return failed(stderr, "check", checkExitUsage, err)
	}
	defer conn.Close()
	rls := rlsv3.NewRateLimitServiceClient(conn)
	if f.token != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+f.token)
	}
	over := 0
	_, err = f.eachAttempt(ctx, func(i int) error {
		callCtx, cancel := context.WithTimeout(ctx, f.timeout)
		resp, err := rls.ShouldRateLimit(callCtx, req)
		cancel()
		if err != nil {
			fmt.Fprintf(stderr, "floodgate check: attempt %d: %s\n", i, describeError(err))
			return exitCode(checkExitError)
		}
		if resp.GetOverallCode() == rlsv3.RateLimitResponse_OVER_LIMIT {
			over++
		}
		if !f.json {
			writeEnvoyAnswer(stdout, i, f.envoy.descriptors, resp)
			return nil
		}
		b, err := protojson.MarshalOptions{EmitDefaultValues: true}.Marshal(resp)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s\n", b)
		return nil
	})
	if err != nil {
		return err
	}
	if f.failOnDeny && over > 0 {
		return exitCode(checkExitDenied)
	}
	return nil
}

// writeEnvoyAnswer prints one ShouldRateLimit answer as a table: the
// overall code, then each descriptor with its status.
func writeEnvoyAnswer(w io.Writer, attempt int, descriptors []string, resp *rlsv3.RateLimitResponse) {
	fmt.Fprintf(w, "attempt %d: %s\n", attempt, resp.GetOverallCode())
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  DESCRIPTOR\tCODE\tREMAINING\tLIMIT\tRESET AFTER")
	for i, st := range resp.GetStatuses() {
		desc := "?"
		if i < len(descriptors) {
			desc = descriptors[i]
		}
		remaining, limit, reset := "-", "none", "-"
		if l := st.GetCurrentLimit(); l != nil {
			remaining = fmt.Sprint(st.GetLimitRemaining())
			limit = fmt.Sprintf("%d/%s", l.GetRequestsPerUnit(), strings.ToLower(l.GetUnit().String()))
			reset = simulate.ShortDuration(st.GetDurationUntilReset().AsDuration())
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", desc, st.GetCode(), remaining, limit, reset)
	}
	_ = tw.Flush()
}
