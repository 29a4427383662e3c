package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// startAsReference runs the binary as the reference's image runs its own:
// under the name ratelimit (a link to floodgate), with no arguments, and
// an environment of the reference's variables only (env, plus PATH and
// HOME). The ports are the reference's PORT and GRPC_PORT set to 0 (free
// ones); the test reads them from the "serving" line, so env must have
// LOG_LEVEL info (or debug) and LOG_FORMAT json.
func startAsReference(t testing.TB, env map[string]string) *proc {
	t.Helper()
	link := filepath.Join(t.TempDir(), "ratelimit")
	if err := os.Symlink(binary, link); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(link)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "GORACE=halt_on_error=1 atexit_sleep_ms=0"}
	for _, k := range slices.Sorted(mapKeys(env)) {
		cmd.Env = append(cmd.Env, k+"="+env[k])
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{t: t, cmd: cmd, logs: &logBuffer{}, done: make(chan error, 1)}
	ready := make(chan map[string]any, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			p.logs.add(line)
			var rec map[string]any
			if json.Unmarshal([]byte(line), &rec) == nil && rec["msg"] == "serving" {
				ready <- rec
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
		p.done <- cmd.Wait()
	}()
	select {
	case rec := <-ready:
		p.GRPCAddr, _ = rec["grpc"].(string)
		p.HTTPAddr, _ = rec["http"].(string)
	case err := <-p.done:
		t.Fatalf("ratelimit (floodgate) exited before serving: %v\n%s", err, p.logs)
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("ratelimit (floodgate) did not start in 30s\n%s", p.logs)
	}
	t.Cleanup(func() { p.Stop() })
	return p
}

func mapKeys(m map[string]string) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// referenceEnv is the environment of a test against the reference's
// variables: the config folder laid out as the reference's runtime
// ($RUNTIME_ROOT/$RUNTIME_SUBDIRECTORY/config/), free loopback ports, JSON
// logs at info, and extra on top.
func referenceEnv(t testing.TB, files map[string]string, extra map[string]string) map[string]string {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, "ratelimit", "config")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	env := map[string]string{
		"RUNTIME_ROOT":         root,
		"RUNTIME_SUBDIRECTORY": "ratelimit",
		"HOST":                 "127.0.0.1",
		"PORT":                 "0",
		"GRPC_HOST":            "127.0.0.1",
		"GRPC_PORT":            "0",
		"LOG_LEVEL":            "info",
		"LOG_FORMAT":           "json",
	}
	for k, v := range extra {
		env[k] = v
	}
	return env
}

// rlsClient dials addr's Envoy API.
func rlsClient(t testing.TB, addr string) rlsv3.RateLimitServiceClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return rlsv3.NewRateLimitServiceClient(conn)
}

// answerString is the parts of an answer the reference fixes, in one
// line: the overall code, each status (code, limit as
// requests_per_unit/unit and its name, limit_remaining), the response
// headers but their Reset value (the seconds left, which depend on the
// clock) and, when present, the dynamic metadata as JSON.
func answerString(r *rlsv3.RateLimitResponse) string {
	var b strings.Builder
	b.WriteString(strings.TrimSuffix(r.GetOverallCode().String(), "_LIMIT"))
	for _, s := range r.GetStatuses() {
		b.WriteString(" | " + strings.TrimSuffix(s.GetCode().String(), "_LIMIT"))
		if l := s.GetCurrentLimit(); l != nil {
			fmt.Fprintf(&b, " %d/%s", l.GetRequestsPerUnit(), strings.ToLower(l.GetUnit().String()))
			if l.GetName() != "" {
				b.WriteString(" " + strconv.Quote(l.GetName()))
			}
		}
		fmt.Fprintf(&b, " rem=%d", s.GetLimitRemaining())
	}
	for _, h := range r.GetResponseHeadersToAdd() {
		v := h.GetValue()
		if strings.HasSuffix(strings.ToLower(h.GetKey()), "-reset") {
			v = "*"
		}
		fmt.Fprintf(&b, " ; %s=%s", h.GetKey(), v)
	}
	if m := r.GetDynamicMetadata(); m != nil {
		b.WriteString(" ; meta=" + canonicalJSON(m))
	}
	return b.String()
}

// diffDesc is one descriptor of a request: its entries (key, value
// pairs), its own hits_addend (nil: the request's) and a limit override
// (rpu 0: none).
type diffDesc struct {
	kv   []string
	hits *uint32
	rpu  uint32
	unit typev3.RateLimitUnit
}

func (d diffDesc) proto() *ratelimitv3.RateLimitDescriptor {
	p := rlsDesc(d.kv...)
	if d.hits != nil {
		p.HitsAddend = wrapperspb.UInt64(uint64(*d.hits))
	}
	if d.rpu > 0 {
		p.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: d.rpu, Unit: d.unit}
	}
	return p
}

// diffStep is one ShouldRateLimit call and the reference's answer (see
// answerString).
type diffStep struct {
	hits  uint32
	descs []diffDesc
	want  string
	// floodgate, when set, is floodgate's deliberately different answer,
	// and why says why (docs/envoy.md lists it).
	floodgate, why string
}

// but is s where floodgate answers got on purpose, for why.
func (s diffStep) but(got, why string) diffStep {
	s.floodgate, s.why = got, why
	return s
}

// expected is the answer floodgate must give.
func (s diffStep) expected() string {
	if s.floodgate != "" {
		return s.floodgate
	}
	return s.want
}

// diffCase is a sequence of calls on one server.
type diffCase struct {
	name   string
	domain string // "" is diff
	steps  []diffStep
}

func d(kv ...string) diffDesc { return diffDesc{kv: kv} }

// step is a call of hits hits (0: hits_addend unset, which is 1).
func step(hits uint32, want string, descs ...diffDesc) diffStep {
	return diffStep{hits: hits, descs: descs, want: want}
}

// request is the call of a step.
func (c diffCase) request(s diffStep) *rlsv3.RateLimitRequest {
	domain := c.domain
	if domain == "" {
		domain = "diff"
	}
	req := &rlsv3.RateLimitRequest{Domain: domain, HitsAddend: s.hits}
	for _, d := range s.descs {
		req.Descriptors = append(req.Descriptors, d.proto())
	}
	return req
}

// runDiff runs every case against rls and returns the answers, by case
// and step.
func runDiff(t *testing.T, rls rlsv3.RateLimitServiceClient, cases []diffCase) [][]string {
	t.Helper()
	out := make([][]string, len(cases))
	for i, c := range cases {
		for _, s := range c.steps {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			resp, err := rls.ShouldRateLimit(ctx, c.request(s))
			cancel()
			got := "error: " + fmt.Sprint(err)
			if err == nil {
				got = answerString(resp)
			}
			out[i] = append(out[i], got)
		}
	}
	return out
}

// waitOutHourEdge waits when the hour (and so the day) turns within the
// next few seconds, so that no sequence straddles a window.
func waitOutHourEdge() { waitOutEdge(time.Hour) }

// waitOutEdge waits when a window of period turns within the next few
// seconds (and past the turn), so that no sequence straddles a window.
func waitOutEdge(period time.Duration) {
	if left := period - time.Duration(time.Now().UnixNano())%period; left < 20*time.Second {
		time.Sleep(left + time.Second)
	}
}

// describe is a request in one short line.
func describe(r *rlsv3.RateLimitRequest) string {
	var parts []string
	for _, d := range r.GetDescriptors() {
		var kv []string
		for _, e := range d.GetEntries() {
			v := e.GetValue()
			if len(v) > 20 {
				v = fmt.Sprintf("%s…(%d bytes)", v[:10], len(v))
			}
			kv = append(kv, e.GetKey()+"="+v)
		}
		s := strings.Join(kv, ",")
		if h := d.GetHitsAddend(); h != nil {
			s += fmt.Sprintf(" hits=%d", h.GetValue())
		}
		if l := d.GetLimit(); l != nil {
			s += fmt.Sprintf(" limit=%d/%s", l.GetRequestsPerUnit(), l.GetUnit())
		}
		parts = append(parts, "["+s+"]")
	}
	return fmt.Sprintf("%s hits_addend=%d %s", r.GetDomain(), r.GetHitsAddend(), strings.Join(parts, " "))
}

// canonicalJSON is a message as JSON with sorted keys and no spaces
// (protojson varies its spacing on purpose), runs of spaces inside
// strings made one (a limit override's text form, in the reference's
// metadata, varies the same way).
func canonicalJSON(m proto.Message) string {
	js, err := protojson.Marshal(m)
	if err != nil {
		return "unmarshalable: " + err.Error()
	}
	var v any
	if err := json.Unmarshal(js, &v); err != nil {
		return "invalid JSON: " + err.Error()
	}
	out, _ := json.Marshal(squeezeSpaces(v))
	return string(out)
}

// squeezeSpaces makes every run of spaces in v's strings one space.
func squeezeSpaces(v any) any {
	switch x := v.(type) {
	case string:
		return strings.Join(strings.Fields(x), " ")
	case []any:
		for i := range x {
			x[i] = squeezeSpaces(x[i])
		}
	case map[string]any:
		for k := range x {
			x[k] = squeezeSpaces(x[k])
		}
	}
	return v
}
