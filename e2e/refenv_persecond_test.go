package e2e

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/floodgate/floodgate/internal/redistest"
)

// perSecondRules have a per-second limit (counted on REDIS_PERSECOND_URL)
// and hourly ones (on REDIS_URL).
const perSecondRules = `domain: ps
descriptors:
  - key: sec
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: hour
    rate_limit: {unit: hour, requests_per_unit: 1}
`

// writeWatch counts the writes one Redis sees, from its keyspace events
// (an expiry is no write).
type writeWatch struct {
	mu     sync.Mutex
	writes []string
}

func watchWrites(t *testing.T, r *redistest.Server) *writeWatch {
	t.Helper()
	ctx := context.Background()
	if err := r.Client().ConfigSet(ctx, "notify-keyspace-events", "KA").Err(); err != nil {
		t.Fatal(err)
	}
	sub := r.Client().PSubscribe(ctx, "__keyspace@*__:*")
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sub.Close() })
	w := &writeWatch{}
	go func() {
		for m := range sub.Channel() {
			if m.Payload != "expired" {
				w.mu.Lock()
				w.writes = append(w.writes, strings.TrimPrefix(m.Channel, "__keyspace@0__:")+" "+m.Payload)
				w.mu.Unlock()
			}
		}
	}()
	return w
}

// since returns the writes after the first n, once the events have had
// time to arrive.
func (w *writeWatch) since(n int) []string {
	time.Sleep(300 * time.Millisecond)
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.writes[n:]...)
}

func (w *writeWatch) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.writes)
}

// TestReferencePerSecondRedis: with REDIS_PERSECOND=true the per-second
// limits are counted on REDIS_PERSECOND_URL's Redis and the others on
// REDIS_URL's; a request denied by one store charges nothing on the
// other (STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT=true), or, with the
// reference's default (denied hits counted), charges both.
func TestReferencePerSecondRedis(t *testing.T) {
	for _, stop := range []bool{true, false} {
		name := "denied hits counted"
		if stop {
			name = "denied hits not counted"
		}
		t.Run(name, func(t *testing.T) {
			main, sec := redistest.StartServer(t), redistest.StartServer(t)
			env := map[string]string{
				"REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": main.Addr(),
				"REDIS_PERSECOND": "true", "REDIS_PERSECOND_SOCKET_TYPE": "tcp", "REDIS_PERSECOND_URL": sec.Addr(),
				// Room for a busy machine: the answers checked are the Redis
				// servers', never a failure mode's.
				"REDIS_TIMEOUT": "5s",
			}
			if stop {
				env["STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT"] = "true"
			}
			p := startAsReference(t, referenceEnv(t, map[string]string{"ps.yaml": perSecondRules}, env))
			if !p.logs.Contains("per-second limits on their own Redis") {
				t.Errorf("no line says the per-second Redis is used:\n%s", p.logs)
			}
			mw, sw := watchWrites(t, main), watchWrites(t, sec)
			rls := rlsClient(t, p.GRPCAddr)
			call := func(hits uint32, descs ...diffDesc) string {
				t.Helper()
				got := runDiff(t, rls, []diffCase{{domain: "ps", steps: []diffStep{step(hits, "", descs...)}}})
				return strings.SplitN(got[0][0], " ;", 2)[0]
			}
			waitOutHourEdge()

			// wrote checks whether a Redis saw writes since from.
			wrote := func(what string, w *writeWatch, from int, want bool) {
				t.Helper()
				if got := w.since(from); want != (len(got) > 0) {
					t.Errorf("%s: writes %q, want writes: %v", what, got, want)
				}
			}
			steps := []struct {
				what                string
				hits                uint32
				descs               []diffDesc
				want                string // the answer's start
				mainWrite, secWrite bool
			}{
				{"a per-second limit", 1, []diffDesc{d("sec", "a")}, "OK | OK 1/second rem=0", false, true},
				{"an hourly limit", 1, []diffDesc{d("hour", "a")}, "OK | OK 1/hour rem=0", true, false},
				// Denied by the main Redis (hour=a is spent).
				{"denied by the main Redis", 1, []diffDesc{d("sec", "b"), d("hour", "a")}, "OVER | OK 1/second rem=0 | OVER 1/hour", !stop, !stop},
				// Denied by the per-second Redis (2 hits on a limit of 1).
				{"denied by the per-second Redis", 1, []diffDesc{dHits(2, "sec", "c"), d("hour", "c")}, "OVER | OVER 1/second rem=0 | OK 1/hour rem=0", !stop, !stop},
			}
			for _, st := range steps {
				m0, s0 := mw.count(), sw.count()
				if got := call(st.hits, st.descs...); !strings.HasPrefix(got, st.want) {
					t.Fatalf("%s: %s, want %s", st.what, got, st.want)
				}
				wrote(st.what+", the main Redis", mw, m0, st.mainWrite)
				wrote(st.what+", the per-second Redis", sw, s0, st.secWrite)
			}
			want := "OK | OK 1/hour rem=0"
			if !stop {
				want = "OVER | OVER 1/hour rem=0"
			}
			if got := call(1, d("hour", "c")); got != want {
				t.Errorf("hour=c after the denied request: %s, want %s", got, want)
			}
		})
	}
}
