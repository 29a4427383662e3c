package limited

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"strconv"
	"testing"
	"time"
	"unsafe"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/internal/rules"
)

var t0 = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

var inline = algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 10, Period: time.Minute}

// TestAttackersOnTop drives one rule with a million distinct keys over
// five minutes of clock: 900,000 allowed once each, 100,000 denied once
// each (the noise that makes every counter change hands), and ten
// attackers denied 20,000 to 65,000 times each, all interleaved at
// random. The ten must be the rule's top ten, in order, with counts
// within 5% of the truth, in the window and in total.
func TestAttackersOnTop(t *testing.T) {
	const (
		allowedKeys = 900_000
		noiseKeys   = 100_000
		attackers   = 10
		span        = 5 * time.Minute
	)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))

	// Events: >= 0 an attacker, -1 an allowed key, -2 a noise key.
	var events []int8
	truth := make([]int, attackers)
	for i := range attackers {
		truth[i] = 20_000 + 5_000*i
		for range truth[i] {
			events = append(events, int8(i))
		}
	}
	for range allowedKeys {
		events = append(events, -1)
	}
	for range noiseKeys {
		events = append(events, -2)
	}
	rng.Shuffle(len(events), func(i, j int) { events[i], events[j] = events[j], events[i] })

	tr := New(Config{})
	step := span / time.Duration(len(events))
	end := t0.Add(step * time.Duration(len(events)-1))
	decayed := make([]float64, attackers)
	allowedN, noiseN := 0, 0
	for n, ev := range events {
		now := t0.Add(step * time.Duration(n))
		switch {
		case ev >= 0:
			tr.ObserveCheck(now, "api", false, inline, "attacker-"+strconv.Itoa(int(ev)), 1, false)
			decayed[ev] += math.Exp(-end.Sub(now).Seconds() / ShortWindow.Seconds())
		case ev == -1:
			tr.ObserveCheck(now, "api", false, inline, "user-"+strconv.Itoa(allowedN), 1, true)
			allowedN++
		default:
			tr.ObserveCheck(now, "api", false, inline, "noise-"+strconv.Itoa(noiseN), 1, false)
			noiseN++
		}
	}
	if allowedN+noiseN != 1_000_000 {
		t.Fatalf("%d distinct keys, want 1,000,000", allowedN+noiseN)
	}

	r := tr.Report(end, Query{K: 10})
	if len(r.Rules) != 1 {
		t.Fatalf("%d rules, want 1", len(r.Rules))
	}
	keys := r.Rules[0].Keys
	if len(keys) != attackers {
		t.Fatalf("%d keys, want %d: %+v", len(keys), attackers, keys)
	}
	for rank, k := range keys {
		want := attackers - 1 - rank // the heaviest first
		if k.Key != "attacker-"+strconv.Itoa(want) {
			t.Fatalf("rank %d is %q, want attacker-%d", rank, k.Key, want)
		}
		if got, w := float64(k.Denied.Total), float64(truth[want]); math.Abs(got-w) > 0.05*w {
			t.Errorf("%s: denied total %v, want %v ±5%%", k.Key, got, w)
		}
		if got, w := k.Denied.M1, decayed[want]; math.Abs(got-w) > 0.05*w {
			t.Errorf("%s: denied 1m %v, want %.1f ±5%%", k.Key, got, w)
		}
	}
	if got := r.Rules[0].Decisions; got != int64(len(events)) {
		t.Errorf("rule decisions %d, want %d", got, len(events))
	}
}

// TestMemoryBound fills every rule's every counter, with the keyed hash
// on, and compares the heap's growth with Config.memoryBound.
func TestMemoryBound(t *testing.T) {
	cfg := Config{Rules: 64, Keys: 256, Salt: []byte("salt")}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	tr := New(cfg)
	key := make([]byte, 200) // longer than KeyBytes
	for r := range cfg.Rules {
		policy := "policy-" + strconv.Itoa(r)
		for k := range 2 * cfg.Keys {
			copy(key, strconv.Itoa(k))
			tr.ObserveCheck(t0, policy, false, inline, string(key), 1, false)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	grew := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	bound := cfg.memoryBound()
	t.Logf("heap grew %d bytes for %d rules of %d keys; bound %d", grew, cfg.Rules, cfg.Keys, bound)
	if grew > bound {
		t.Errorf("heap grew %d bytes, above memoryBound %d", grew, bound)
	}
	if grew < bound/2 {
		t.Errorf("heap grew %d bytes, under half of memoryBound %d: the bound no longer measures the tracker", grew, bound)
	}
	runtime.KeepAlive(tr)
}

// TestNoAllocations: a decision, tracked or not, allowed or denied,
// taking a counter or not, keyed hash or not, allocates nothing once its
// rule is tracked.
func TestNoAllocations(t *testing.T) {
	l := &rules.Limit{Name: "per_ip", ID: "shop|remote_address|0", Domain: "shop", Rate: inline}
	for _, salt := range [][]byte{nil, []byte("salt")} {
		tr := New(Config{Keys: 8, Salt: salt})
		entries := []rules.Entry{{Key: "remote_address", Value: "10.0.0.1"}}
		keys := make([]string, 1000)
		for i := range keys {
			keys[i] = "key-" + strconv.Itoa(i)
		}
		tr.ObserveCheck(t0, "api", false, inline, "warm", 1, false)
		tr.ObserveEnvoy(t0, l, entries, 1, false)
		i := 0
		allocs := testing.AllocsPerRun(1000, func() {
			i++
			now := t0.Add(time.Duration(i) * time.Millisecond)
			tr.ObserveCheck(now, "api", false, inline, keys[i%len(keys)], 1, i%3 == 0)
			tr.ObserveCheck(now, "", false, inline, keys[i%7], 2, false)
			tr.ObserveEnvoy(now, l, entries, 1, i%2 == 0)
		})
		if allocs != 0 {
			t.Errorf("salt %q: %v allocations a decision, want 0", salt, allocs)
		}
	}
}

func TestRulesAndQueries(t *testing.T) {
	tr := New(Config{})
	shop := &rules.Limit{Name: "shop.per_ip", ID: "shop|ip|0", Domain: "shop", Rate: inline}
	mail := &rules.Limit{Name: "mail.per_user", ID: "mail|user|0", Domain: "mail", Rate: inline}
	for range 5 {
		tr.ObserveEnvoy(t0, shop, []rules.Entry{{Key: "ip", Value: "1.2.3.4"}}, 1, false)
	}
	tr.ObserveEnvoy(t0, shop, []rules.Entry{{Key: "ip", Value: "1.2.3.4"}}, 1, true)
	tr.ObserveEnvoy(t0, mail, []rules.Entry{{Key: "user", Value: "bob"}, {Key: "op", Value: "send"}}, 3, false)
	tr.ObserveCheck(t0, "login", true, inline, "alice", 1, false)
	tr.ObserveCheck(t0, "", false, inline, "carol", 1, false)
	tr.ObserveCheck(t0, "", false, algorithms.Limit{Algorithm: algorithms.SlidingWindow, Requests: 5, Period: time.Second}, "dave", 1, false)

	tests := []struct {
		name  string
		q     Query
		rules []string // domain/rule: key
	}{
		{"all", Query{}, []string{"shop/shop.per_ip: ip=1.2.3.4", "/inline 10 per 1m0s, token_bucket: carol", "/inline 5 per 1s, sliding_window: dave", "/login: alice", "mail/mail.per_user: user=bob, op=send"}},
		{"domain", Query{Domain: "mail"}, []string{"mail/mail.per_user: user=bob, op=send"}},
		{"rule", Query{Rule: "login"}, []string{"/login: alice"}},
		{"none", Query{Rule: "nope"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tr.Report(t0, tt.q)
			var got []string
			for _, rr := range r.Rules {
				for _, k := range rr.Keys {
					got = append(got, rr.Domain+"/"+rr.Rule+": "+k.Key)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.rules) {
				t.Errorf("got %q, want %q", got, tt.rules)
			}
		})
	}
	r := tr.Report(t0, Query{Domain: "shop"})
	k := r.Rules[0].Keys[0]
	if k.Denied.Total != 5 || k.Allowed.Total != 1 || k.Denied.M1 != 5 || k.AllowedShare.Total != 0.167 {
		t.Errorf("shop key %+v, want 5 denied, 1 allowed, share 0.167", k)
	}
	if src := r.Rules[0]; src.Kind != "envoy" || src.ID != "shop|ip|0" || src.Decisions != 6 || src.Denied != 5 {
		t.Errorf("shop rule %+v", src)
	}
	if r := tr.Report(t0, Query{Rule: "mail.per_user"}); r.Rules[0].Keys[0].DeniedCost.Total != 3 {
		t.Errorf("mail key denied cost %d, want 3", r.Rules[0].Keys[0].DeniedCost.Total)
	}
	if r := tr.Report(t0, Query{Rule: "login"}); !r.Rules[0].Shadow || r.Rules[0].Kind != "policy" {
		t.Errorf("login rule %+v, want a shadow policy", r.Rules[0])
	}
}

// TestDecay: a denial weighs e^-1 after one window, and a key whose
// denials have decayed away leaves the report.
func TestDecay(t *testing.T) {
	tr := New(Config{})
	for range 100 {
		tr.ObserveCheck(t0, "api", false, inline, "k", 1, false)
	}
	for _, tt := range []struct {
		after    time.Duration
		m1, m15  float64
		listed1m bool
	}{
		{0, 100, 100, true},
		{time.Minute, 36.8, 93.6, true},
		{15 * time.Minute, 0, 36.8, false},
		{3 * time.Hour, 0, 0, false}, // past the landmark's renormalization
	} {
		r := tr.Report(t0.Add(tt.after), Query{Window: "15m"})
		keys := r.Rules[0].Keys
		if tt.m15 == 0 {
			if len(keys) != 0 {
				t.Errorf("after %v: %+v, want no key", tt.after, keys)
			}
			continue
		}
		if got := keys[0].Denied; got.M1 != tt.m1 || got.M15 != tt.m15 || got.Total != 100 {
			t.Errorf("after %v: %+v, want 1m %v, 15m %v, total 100", tt.after, got, tt.m1, tt.m15)
		}
		if got := len(tr.Report(t0.Add(tt.after), Query{}).Rules[0].Keys) > 0; got != tt.listed1m {
			t.Errorf("after %v: listed in 1m %v, want %v", tt.after, got, tt.listed1m)
		}
	}
	// After the renormalization, counting goes on from the new landmark.
	later := t0.Add(3 * time.Hour)
	tr.ObserveCheck(later, "api", false, inline, "k", 1, false)
	if got := tr.Report(later, Query{}).Rules[0].Keys[0].Denied; got.M1 != 1 || got.Total != 101 {
		t.Errorf("after renormalization: %+v, want 1m 1, total 101", got)
	}
}

// TestRuleCap: rules beyond Config.Rules are not tracked (counted as
// untracked) until a rule unseen for LongWindow gives its place.
func TestRuleCap(t *testing.T) {
	tr := New(Config{Rules: 2})
	tr.ObserveCheck(t0, "a", false, inline, "k", 1, false)
	tr.ObserveCheck(t0.Add(10*time.Minute), "b", false, inline, "k", 1, false)
	tr.ObserveCheck(t0.Add(10*time.Minute), "c", false, inline, "k", 1, false)
	if r := tr.Report(t0, Query{}); len(r.Rules) != 2 || r.UntrackedDecisions != 1 {
		t.Fatalf("%d rules, %d untracked; want 2 and 1", len(r.Rules), r.UntrackedDecisions)
	}
	tr.ObserveCheck(t0.Add(16*time.Minute), "c", false, inline, "k", 1, false)
	r := tr.Report(t0.Add(16*time.Minute), Query{})
	var names []string
	for _, rr := range r.Rules {
		names = append(names, rr.Rule)
	}
	if fmt.Sprint(names) != "[b c]" && fmt.Sprint(names) != "[c b]" {
		t.Errorf("rules %v, want b and c (a unseen for 16m gave its place)", names)
	}
}

func TestHashedKeys(t *testing.T) {
	a, b := New(Config{Salt: []byte("s1")}), New(Config{Salt: []byte("s1")})
	other := New(Config{Salt: []byte("s2")})
	key := func(tr *Tracker, k string) string {
		tr.ObserveCheck(t0, "api", false, inline, k, 1, false)
		return tr.Report(t0, Query{}).Rules[0].Keys[0].Key
	}
	ha, hb, ho := key(a, "10.1.2.3"), key(b, "10.1.2.3"), key(other, "10.1.2.3")
	if len(ha) != 16 || ha != hb || ha == ho {
		t.Errorf("hashes %q %q %q: want 16 hex digits, equal for one salt, different for another", ha, hb, ho)
	}
	r := a.Report(t0, Query{})
	if !r.Hashed || r.Rules[0].Keys[0].Key == "10.1.2.3" {
		t.Errorf("report %+v shows the key", r)
	}
}

func TestPrintable(t *testing.T) {
	for _, tt := range []struct {
		in        string
		truncated bool
		want      string
	}{
		{"alice", false, "alice"},
		{"ünïcode ✓", false, "ünïcode ✓"},
		{"a\xffb", false, `a\xffb`},
		{"back\\slash", false, `back\\slash`},
		{"line\nbreak\x1b[31m", false, `line\u{000a}break\u{001b}[31m`},
		{"rtl\u202eevil", false, `rtl\u{202e}evil`},
		{"<script>alert(1)</script>", false, "<script>alert(1)</script>"},
		{"cut é"[:len("cut é")-1], true, "cut …"},
		{"whole é", true, "whole é…"},
	} {
		if got := Printable([]byte(tt.in), tt.truncated); got != tt.want {
			t.Errorf("Printable(%q, %v) = %q, want %q", tt.in, tt.truncated, got, tt.want)
		}
	}
}

func TestLongKeyTruncated(t *testing.T) {
	tr := New(Config{})
	long := string(make([]byte, 300))
	for i := range 3 {
		k := fmt.Sprintf("%0300d", i) // differ only past KeyBytes
		tr.ObserveCheck(t0, "api", false, inline, k, 1, false)
	}
	_ = long
	keys := tr.Report(t0, Query{}).Rules[0].Keys
	if len(keys) != 3 {
		t.Fatalf("%d keys, want 3 (counted whole, shown cut)", len(keys))
	}
	for _, k := range keys {
		if !k.Truncated || len(k.Key) != KeyBytes+len("…") {
			t.Errorf("key %q (truncated %v), want %d bytes and …", k.Key, k.Truncated, KeyBytes)
		}
	}
}

func TestMerge(t *testing.T) {
	a, b := New(Config{}), New(Config{})
	l := &rules.Limit{Name: "per_ip", ID: "shop|ip|0", Domain: "shop", Rate: inline}
	ip := func(v string) []rules.Entry { return []rules.Entry{{Key: "ip", Value: v}} }
	for range 3 {
		a.ObserveEnvoy(t0, l, ip("1.1.1.1"), 1, false)
	}
	a.ObserveEnvoy(t0.Add(time.Second), l, ip("2.2.2.2"), 1, false)
	for range 3 {
		b.ObserveEnvoy(t0.Add(2*time.Second), l, ip("2.2.2.2"), 1, false)
	}
	b.ObserveEnvoy(t0.Add(2*time.Second), l, ip("2.2.2.2"), 1, true)
	now := t0.Add(2 * time.Second)
	m := Merge(Query{}, DefaultKeys, a.Report(now, Query{}), b.Report(now, Query{}))
	if m.Replicas != 2 || len(m.Rules) != 1 {
		t.Fatalf("merged %d replicas, %d rules; want 2, 1", m.Replicas, len(m.Rules))
	}
	rr := m.Rules[0]
	if rr.Decisions != 8 || rr.Denied != 7 || len(rr.Keys) != 2 {
		t.Fatalf("rule %+v, want 8 decisions, 7 denied, 2 keys", rr)
	}
	top := rr.Keys[0]
	if top.Key != "ip=2.2.2.2" || top.Denied.Total != 4 || top.Allowed.Total != 1 ||
		!top.FirstSeen.Equal(t0.Add(time.Second)) || !top.LastSeen.Equal(now) {
		t.Errorf("top key %+v, want ip=2.2.2.2 with 4 denied, 1 allowed, seen from t0+1s to t0+2s", top)
	}
	var denied int64
	for _, p := range rr.Series {
		denied += p.Denied
	}
	if denied != 7 {
		t.Errorf("chart denials %d, want 7", denied)
	}
}

func TestQueryValidate(t *testing.T) {
	for _, tt := range []struct {
		q   Query
		bad bool
	}{
		{Query{}, false},
		{Query{K: 5, By: "cost", Window: "15m"}, false},
		{Query{K: -1}, true},
		{Query{By: "keys"}, true},
		{Query{Window: "1h"}, true},
	} {
		if err := tt.q.Validate(); (err != nil) != tt.bad {
			t.Errorf("%+v: %v, want error %v", tt.q, err, tt.bad)
		}
	}
}

func BenchmarkObserve(b *testing.B) {
	l := &rules.Limit{Name: "per_ip", ID: "shop|ip|0", Domain: "shop", Rate: inline}
	keys := make([][]rules.Entry, 1<<16)
	for i := range keys {
		keys[i] = []rules.Entry{{Key: "remote_address", Value: "10.0." + strconv.Itoa(i>>8) + "." + strconv.Itoa(i&255)}}
	}
	for _, bc := range []struct {
		name   string
		denied int // one in denied decisions is a denial
	}{{"allowed", 0}, {"denied-1in10", 10}, {"denied-all", 1}} {
		b.Run(bc.name, func(b *testing.B) {
			tr := New(Config{})
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				i := rand.IntN(len(keys))
				for pb.Next() {
					i = (i + 1) & (len(keys) - 1)
					allowed := bc.denied == 0 || i%bc.denied != 0
					tr.ObserveEnvoy(t0, l, keys[i], 1, allowed)
				}
			})
		})
	}
}

// TestClockBack: decisions at a time before the rule's landmark (a clock
// set back) count as at the landmark, never as weightless.
func TestClockBack(t *testing.T) {
	tr := New(Config{})
	tr.ObserveCheck(t0, "api", false, inline, "k", 1, false)
	for range 4 {
		tr.ObserveCheck(t0.Add(-24*time.Hour), "api", false, inline, "k", 1, false)
	}
	if got := tr.Report(t0, Query{}).Rules[0].Keys[0].Denied; got.M1 != 5 || got.M15 != 5 || got.Total != 5 {
		t.Errorf("denied %+v, want 5 in every column", got)
	}
}

// memoryBound is the most memory the Tracker's rules take, in bytes, when
// every rule is tracked and every counter taken.
func (c Config) memoryBound() int64 {
	keys := c.keys()
	perRule := allocated(int64(unsafe.Sizeof(table{}))) +
		allocated(int64(keys)*int64(unsafe.Sizeof(counter{}))) +
		allocated(int64(keys)*4) + allocated(int64(indexSize(keys))*4) + // heap and index
		ruleAllowance
	return int64(c.rules()) * perRule
}

// ruleAllowance is memoryBound's allowance per rule beyond its table:
// the keyed hash's state (two SHA-256 states and their saved copies),
// the rule's names and its entries in the index map.
const ruleAllowance = 2048

// allocated is at most what the Go allocator takes for n bytes: small
// objects go to size classes at most 1/8 above their size, large ones to
// whole 8 KiB pages.
func allocated(n int64) int64 {
	if n <= 32<<10 {
		return n + n/8 + 16
	}
	return (n + 8<<10 - 1) &^ (8<<10 - 1)
}
