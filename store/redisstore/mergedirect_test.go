package redisstore

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/store"
)

// TestMergeMarksDirect: a call of one counter request that writes is
// marked for the script's direct path (the header's write byte), one of
// a sliding window log request for the log's, and a merged script call
// keeps the mark only when every call in it has the same: a call of two
// requests, a mix or a probe takes the general path, and merged probes
// stay probes.
func TestMergeMarksDirect(t *testing.T) {
	s, err := New(redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}), Config{BatchMaxSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tb := algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 10, Period: time.Minute}
	log := algorithms.Limit{Algorithm: algorithms.SlidingWindowLog, Requests: 10, Period: time.Minute}
	one := []store.Request{{Key: "a", Limit: tb, Cost: 1}}
	two := []store.Request{{Key: "a", Limit: tb, Cost: 1}, {Key: "a", Limit: tb, Cost: 1, Scope: "s"}}
	logged := []store.Request{{Key: "a", Limit: log, Cost: 1}}
	twoLogs := []store.Request{{Key: "a", Limit: log, Cost: 1}, {Key: "b", Limit: log, Cost: 1}}
	write := header{nowMs: -1}
	probe := header{nowMs: -1, probe: true}
	mk := func(reqs []store.Request, h header) *call { return s.plan(reqs, h, charge)[0] }
	tests := []struct {
		name  string
		calls []*call
		want  byte
	}{
		{"one request", []*call{mk(one, write)}, hdrDirect},
		{"two requests", []*call{mk(two, write)}, hdrWrite},
		{"a log", []*call{mk(logged, write)}, hdrLog},
		{"two logs", []*call{mk(twoLogs, write)}, hdrWrite},
		{"a log probe", []*call{mk(logged, probe)}, hdrProbe},
		{"merged logs", []*call{mk(logged, write), mk(logged, write), mk(logged, write)}, hdrLog},
		{"merged, a log then a counter", []*call{mk(logged, write), mk(one, write)}, hdrWrite},
		{"merged, logs then two logs", []*call{mk(logged, write), mk(logged, write), mk(twoLogs, write)}, hdrWrite},
		{"merged, a log, a counter, a log", []*call{mk(logged, write), mk(one, write), mk(logged, write)}, hdrWrite},
		{"a probe", []*call{mk(one, probe)}, hdrProbe},
		{"merged, all direct", []*call{mk(one, write), mk(one, write), mk(one, write)}, hdrDirect},
		{"merged, the second of two requests", []*call{mk(one, write), mk(two, write)}, hdrWrite},
		{"merged, the third a log", []*call{mk(one, write), mk(one, write), mk(logged, write)}, hdrWrite},
		{"merged, the first of two requests", []*call{mk(two, write), mk(one, write)}, hdrWrite},
		{"merged probes", []*call{mk(one, probe), mk(two, probe), mk(one, probe)}, hdrProbe},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			units := merge(tc.calls)
			if len(units) != 1 {
				t.Fatalf("%d script calls, want 1", len(units))
			}
			if got := units[0].args[0].([]byte)[hdrLen-1]; got != tc.want {
				t.Fatalf("write byte %d, want %d", got, tc.want)
			}
		})
	}
}

// TestMergeMarksRepeats: in a merged direct script call, each request
// whose key an earlier one holds carries flagRepeat (so the script reads
// it after that one's write rather than from its MGET), from the second
// call on; other requests, and calls that do not merge direct, carry
// none.
func TestMergeMarksRepeats(t *testing.T) {
	s, err := New(redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}), Config{BatchMaxSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tb := algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 10, Period: time.Minute}
	mk := func(key string) *call {
		return s.plan([]store.Request{{Key: key, Limit: tb, Cost: 1}}, header{nowMs: -1}, charge)[0]
	}
	two := s.plan([]store.Request{{Key: "a", Limit: tb, Cost: 1}, {Key: "b", Limit: tb, Cost: 1}}, header{nowMs: -1}, charge)[0]
	tests := []struct {
		name  string
		calls []*call
		want  []bool // flagRepeat on each group's request
	}{
		{"two of one key", []*call{mk("a"), mk("a")}, []bool{false, true}},
		{"three keys, the first again last", []*call{mk("a"), mk("b"), mk("c"), mk("a")}, []bool{false, false, false, true}},
		{"all different", []*call{mk("a"), mk("b")}, []bool{false, false}},
		{"one key three times", []*call{mk("a"), mk("a"), mk("a")}, []bool{false, true, true}},
		{"not direct: the general path marks nothing", []*call{mk("a"), two, mk("a")}, []bool{false, false, false}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u := merge(tc.calls)[0]
			for i, want := range tc.want {
				req := u.args[i].([]byte)
				if i == 0 {
					req = req[hdrLen:]
				}
				if got := req[0]&(flagRepeat<<3) != 0; got != want {
					t.Errorf("group %d: flagRepeat %v, want %v", i, got, want)
				}
			}
		})
	}
}
