package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/internal/redistest"
)

// TestDirectPathProbeWritesNothing: a probe (the header's write 0) whose
// groups are one request each decides like the real call but writes
// nothing: the store never marks a probe direct, and a probe marked so
// is refused rather than written.
func TestDirectPathProbeWritesNothing(t *testing.T) {
	ctx := context.Background()
	c := redistest.StartServer(t).Client()
	l := algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 5, Period: time.Minute}
	reqs := []luaReq{{key: "probe:a", l: l, cost: 2}, {key: "probe:b", l: l, cost: 1, group: true}}
	got, err := runScriptHeader(ctx, c, pathStore, header{nowMs: 1_780_000_000_000, keepMs: keepMs, probe: true}, reqs)
	if err != nil {
		t.Fatal(err)
	}
	if !got[0].Allowed || got[0].Remaining != 3 || !got[1].Allowed || got[1].Remaining != 4 {
		t.Fatalf("probe decided %+v, want both allowed with 3 and 4 left", got)
	}
	if n, err := c.Exists(ctx, "probe:a", "probe:b").Result(); err != nil || n != 0 {
		t.Fatalf("a probe wrote %d keys (%v)", n, err)
	}
}
