package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	floodgatev1 "github.com/floodgate/floodgate/gen/floodgate/v1"
)

// door sends one floodgate.v1 call (Check or Settle) through one of the
// binary's front doors and decodes the answer into resp.
type door func(ctx context.Context, rpc string, req, resp proto.Message) error

// grpcDoor calls the gRPC port with the user token.
func grpcDoor(t *testing.T, p *proc, token string) door {
	c := p.Client(t)
	return func(ctx context.Context, rpc string, req, resp proto.Message) error {
		ctx = withToken(ctx, token)
		var got proto.Message
		var err error
		switch rpc {
		case "Check":
			got, err = c.Check(ctx, req.(*floodgatev1.CheckRequest))
		case "Settle":
			got, err = c.Settle(ctx, req.(*floodgatev1.SettleRequest))
		default:
			return fmt.Errorf("no such call %q", rpc)
		}
		if err != nil {
			return err
		}
		proto.Merge(resp, got)
		return nil
	}
}

// httpDoor posts to the HTTP/JSON API with the user token, over kept-alive
// connections.
func httpDoor(p *proc, token string) door {
	client := &http.Client{Timeout: 10 * time.Second}
	paths := map[string]string{"Check": "/v1/check", "Settle": "/v1/settle"}
	return func(ctx context.Context, rpc string, req, resp proto.Message) error {
		body, err := protojson.Marshal(req)
		if err != nil {
			return err
		}
		r, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+p.HTTPAddr+paths[rpc], bytes.NewReader(body))
		if err != nil {
			return err
		}
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Authorization", "Bearer "+token)
		a, err := client.Do(r)
		if err != nil {
			return err
		}
		defer a.Body.Close()
		b, err := io.ReadAll(a.Body)
		if err != nil {
			return err
		}
		if a.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: %d %s", paths[rpc], a.StatusCode, b)
		}
		return protojson.Unmarshal(b, resp)
	}
}

// flood runs n calls made by req(i) through d on 8 workers and returns the
// answers in order; the first error fails the test.
func flood[R proto.Message](t *testing.T, d door, rpc string, n int, req func(i int) proto.Message, resp func() R) []R {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out := make([]R, n)
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < n; i += 8 {
				out[i] = resp()
				if err := d(ctx, rpc, req(i), out[i]); err != nil {
					errs <- fmt.Errorf("%s %d: %w", rpc, i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return out
}

// TestMemoryCapKeepsSpentCounter: with --memory-max-keys 512 (2 keys in
// each of the store's 256 shards), a spent fixed_window 10/1h key stays
// denied after 1,500 free settlements (reserved 0, actual 0, a fresh
// idempotency key each, on other keys) and after 1,500 inline checks with
// a 100-year period on fresh keys (each nearly 3 times the cap), through
// both front doors with a plain (non-admin) token. What the new keys get is
// the documented full-store answer: settlements are recorded apart from the
// counters (never refused, never degraded); checks on new keys are decided
// while there is room and, once the counters fill the cap, answered by the
// failure mode (here the default, open: allowed and degraded), while the
// spent key keeps deciding exactly.
func TestMemoryCapKeepsSpentCounter(t *testing.T) {
	const maxKeys, n = 512, 1500
	fw := floodgatev1.Algorithm_ALGORITHM_FIXED_WINDOW
	hour := &floodgatev1.CheckRequest_Limit{Limit: &floodgatev1.Limit{Requests: 10, Period: durationpb.New(time.Hour)}}
	century := &floodgatev1.CheckRequest_Limit{Limit: &floodgatev1.Limit{Requests: 10, Period: durationpb.New(100 * 365 * 24 * time.Hour)}}
	for _, tc := range []struct {
		name string
		door func(t *testing.T, p *proc) door
	}{
		{"grpc", func(t *testing.T, p *proc) door { return grpcDoor(t, p, httpUserToken) }},
		{"http", func(t *testing.T, p *proc) door { return httpDoor(p, httpUserToken) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tokens := writeFile(t, t.TempDir(), "tokens", []byte(httpAdminToken+" admin\n"+httpUserToken+"\n"))
			p := startServe(t, "--memory-max-keys", fmt.Sprint(maxKeys), "--auth-token-file", tokens)
			d := tc.door(t, p)
			victim := func() *floodgatev1.CheckResponse {
				t.Helper()
				r := &floodgatev1.CheckResponse{}
				if err := d(context.Background(), "Check", &floodgatev1.CheckRequest{Key: "victim", Algorithm: fw, Cost: 1, Source: hour}, r); err != nil {
					t.Fatal(err)
				}
				return r
			}
			for i := range 10 {
				if r := victim(); !r.Allowed || r.Degraded {
					t.Fatalf("spending check %d: %v; want allowed", i+1, r)
				}
			}
			spent := func(after string) {
				t.Helper()
				if r := victim(); r.Allowed || r.Remaining != 0 || r.Degraded {
					t.Fatalf("spent key after %s: %v; want denied, 0 remaining, not degraded", after, r)
				}
			}
			spent("10 checks")

			settles := flood(t, d, "Settle", n, func(i int) proto.Message {
				return &floodgatev1.SettleRequest{Key: fmt.Sprintf("settler-%d", i), Algorithm: fw, IdempotencyKey: fmt.Sprintf("idem-%d", i),
					Source: &floodgatev1.SettleRequest_Limit{Limit: hour.Limit}}
			}, func() *floodgatev1.SettleResponse { return &floodgatev1.SettleResponse{} })
			for i, r := range settles {
				if r.Degraded || r.Duplicate || r.Debt != 0 {
					t.Fatalf("settle %d: %v; want recorded (not degraded, not a duplicate, nothing owed)", i, r)
				}
			}
			spent("1,500 settlements")

			checks := flood(t, d, "Check", n, func(i int) proto.Message {
				return &floodgatev1.CheckRequest{Key: fmt.Sprintf("century-%d", i), Algorithm: fw, Cost: 1, Source: century}
			}, func() *floodgatev1.CheckResponse { return &floodgatev1.CheckResponse{} })
			spent("1,500 inline 100-year checks")
			var decided, open int
			for i, r := range checks {
				switch {
				case !r.Allowed:
					t.Fatalf("check %d on a new key: %v; want allowed (decided, or the open failure mode)", i, r)
				case r.Degraded:
					open++
				default:
					decided++
				}
			}
			t.Logf("%d new 100-year keys: %d decided by the store, %d answered by the failure mode (store full)", n, decided, open)
			if decided >= maxKeys || open < n-maxKeys {
				t.Fatalf("%d new keys decided, %d by the failure mode; want fewer than %d decided (the spent key holds one entry)", decided, open, maxKeys)
			}
		})
	}
}
