package redisstore

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/internal/redistest"
	"github.com/floodgate/floodgate/store"
)

// faultsT0 is the simulated clock these tests decide at (ClientTime).
var faultsT0 = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// TestMalformedStateFailsAlone: a key holding a value no script writes
// fails only the decisions on it, never those batched with it (merged
// into one script call with it, or in a Decide call beside it on
// another slot's call), and a request that failed charges nothing, on
// every path of the script: the direct one (a counter), the log's and
// the general one (a Decide of two requests).
func TestMalformedStateFailsAlone(t *testing.T) {
	srv := redistest.StartServer(t)
	ctx := context.Background()
	for _, alg := range []algorithms.Algorithm{algorithms.TokenBucket, algorithms.FixedWindow, algorithms.SlidingWindowLog} {
		t.Run(alg.String(), func(t *testing.T) {
			// One sender that waits for the others: the callers below
			// share pipelines and script calls.
			s, err := New(srv.Client(), Config{ClientTime: true, Timeout: 5 * time.Second,
				BatchPipelines: 1, BatchMaxWait: 20 * time.Millisecond, Prefix: "bad" + strconv.Itoa(int(alg)) + ":"})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			l := algorithms.Limit{Algorithm: alg, Requests: 5, Period: time.Minute}
			garbled := stateKey(s.cfg.Prefix, alg, hashTag("garbled"), "")
			named := garbled // the key a malformed state's error names
			if windowKeyed(alg) {
				// Its count is in the key of the window of now.
				garbled = windowKey(garbled, faultsT0.Add(l.Period).UnixMilli())
			}
			if err := srv.Client().Set(ctx, garbled, "\xff\xff\xff", 0).Err(); err != nil {
				t.Fatal(err)
			}
			const innocent, onGarbled = 16, 4
			errs := make([]error, innocent+onGarbled+1)
			var wg sync.WaitGroup
			for i := range errs {
				wg.Go(func() {
					var reqs []store.Request
					switch {
					case i < innocent:
						reqs = []store.Request{{Key: "k" + strconv.Itoa(i), Limit: l, Cost: 1}}
					case i < innocent+onGarbled:
						reqs = []store.Request{{Key: "garbled", Limit: l, Cost: 1}}
					default: // the general path: an innocent key beside the garbled one
						reqs = []store.Request{{Key: "beside", Limit: l, Cost: 1}, {Key: "garbled", Limit: l, Cost: 1}}
					}
					errs[i] = s.Decide(ctx, faultsT0, reqs, make([]algorithms.Decision, len(reqs)))
				})
			}
			wg.Wait()
			for i, err := range errs {
				if i < innocent {
					if err != nil {
						t.Errorf("caller %d on its own key: %v, want decided", i, err)
					}
					continue
				}
				if !isStateError(err) || !strings.Contains(err.Error(), keyHash(named)) || strings.Contains(err.Error(), "garbled") {
					t.Errorf("caller %d on the garbled key: %v, want a malformed state named by %s alone", i, err, keyHash(named))
				}
			}
			// What was charged: each innocent key once, "beside" never.
			for i := range innocent + 1 {
				key, want := "k"+strconv.Itoa(i), int64(4)
				if i == innocent {
					key, want = "beside", 5
				}
				out := make([]algorithms.Decision, 1)
				if err := s.Decide(ctx, faultsT0, []store.Request{{Key: key, Limit: l}}, out); err != nil {
					t.Fatalf("look at %s: %v", key, err)
				}
				if out[0].Remaining != want {
					t.Errorf("%s: %d remaining, want %d", key, out[0].Remaining, want)
				}
			}
			if v, _ := srv.Client().Get(ctx, garbled).Result(); v != "\xff\xff\xff" {
				t.Errorf("the garbled key now holds %q; nothing may write it", v)
			}
		})
	}
}

// TestStalledCallsWriteNothing: decide calls that Redis runs only after
// their caller gave up (Redis stopped, then continued) decide and write
// nothing, so the failure mode's answers to those callers are not
// counted.
func TestStalledCallsWriteNothing(t *testing.T) {
	srv := redistest.StartServer(t)
	// A client whose commands end with their context, so an unbatched
	// call returns at its timeout as a batched one does.
	client := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
	defer client.Close()
	ctx := context.Background()
	for _, batch := range []int{0, 1} {
		t.Run("batch size "+strconv.Itoa(batch), func(t *testing.T) {
			s, err := New(client, Config{ClientTime: true, Timeout: 300 * time.Millisecond,
				BatchMaxSize: batch, Prefix: "stall" + strconv.Itoa(batch) + ":"})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			l := algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 5, Period: time.Minute}
			one := []store.Request{{Key: "k", Limit: l, Cost: 1}}
			out := make([]algorithms.Decision, 1)
			if err := s.Decide(ctx, faultsT0, one, out); err != nil || out[0].Remaining != 4 {
				t.Fatalf("first call: %v, %+v; want allowed, 4 left", err, out[0])
			}
			for s.clock.atMs.Load() == 0 { // the offset is measured in the background
				if err := ctx.Err(); err != nil {
					t.Fatal(err)
				}
				time.Sleep(5 * time.Millisecond)
			}
			calls := fcalls(t, srv)
			stopped := true
			if err := syscall.Kill(srv.PID(), syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			defer func() {
				if stopped {
					_ = syscall.Kill(srv.PID(), syscall.SIGCONT)
				}
			}()
			for i := range 2 {
				if err := s.Decide(ctx, faultsT0, one, out); err == nil {
					t.Fatalf("call %d to a stopped Redis: decided %+v, want an error", i, out[0])
				}
			}
			if err := syscall.Kill(srv.PID(), syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
			stopped = false
			// Redis serves the connections that were readable while it
			// slept in its first turns of the event loop: two round trips
			// after it continued, the calls queued then have run.
			for range 2 {
				if err := srv.Client().Ping(ctx).Err(); err != nil {
					t.Fatal(err)
				}
			}
			look := []store.Request{{Key: "k", Limit: l}}
			if err := s.Decide(ctx, faultsT0, look, out); err != nil || out[0].Remaining != 4 {
				t.Errorf("after the stall: %v, %d left; want 4 (the calls answered by the failure mode charged nothing)", err, out[0].Remaining)
			}
			if ran := fcalls(t, srv) - calls; ran < 2 {
				t.Errorf("Redis ran %d decide calls after it continued, want the look and at least one queued while it slept", ran)
			}
		})
	}
}

// fcalls is how many FCALLs srv has run (INFO commandstats).
func fcalls(t *testing.T, srv *redistest.Server) int64 {
	t.Helper()
	info, err := srv.Client().Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(info) {
		if rest, ok := strings.CutPrefix(line, "cmdstat_fcall:calls="); ok {
			n, err := strconv.ParseInt(rest[:strings.IndexByte(rest, ',')], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	return 0
}

// isStateError reports whether err is a malformed state's failure, which
// fails its own request and group only.
func isStateError(err error) bool {
	var se *stateError
	return errors.As(err, &se)
}
