package heartbeat

import (
	"context"
	"testing"
	"time"

	"github.com/floodgate/floodgate/internal/redistest"
)

// TestCountsLiveReplicas: three replicas on one Redis count three; one
// that leaves cleanly is counted out at the next beat; one that stops
// beating is counted out after its TTL; the set's key is the prefix's.
func TestCountsLiveReplicas(t *testing.T) {
	r := redistest.StartServer(t)
	ctx := context.Background()
	const interval = 200 * time.Millisecond
	var hs []*Heartbeat
	for i := range 3 {
		c := r.Client()
		t.Cleanup(func() { c.Close() })
		hs = append(hs, New(c, Config{Prefix: "t:", Interval: interval, ID: string(rune('a' + i))}))
	}
	if hs[0].Replicas() != 0 {
		t.Fatalf("count before any beat = %d, want 0", hs[0].Replicas())
	}
	for _, h := range hs {
		if err := h.Beat(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := hs[0].Beat(ctx); err != nil {
		t.Fatal(err)
	}
	if got := hs[0].Replicas(); got != 3 {
		t.Fatalf("replicas = %d, want 3", got)
	}
	if hs[0].key != "t:replicas" {
		t.Errorf("key %q, want t:replicas", hs[0].key)
	}
	if n, err := r.Client().ZCard(ctx, "t:replicas").Result(); err != nil || n != 3 {
		t.Fatalf("ZCARD t:replicas = %d, %v; want 3", n, err)
	}
	ttl, err := r.Client().PTTL(ctx, "t:replicas").Result()
	if err != nil || ttl <= 0 || ttl > 3*interval {
		t.Errorf("PTTL = %v, %v; want in (0, %v]", ttl, err, 3*interval)
	}

	// c leaves cleanly: counted out at once.
	if err := hs[2].Close(); err != nil {
		t.Fatal(err)
	}
	if err := hs[0].Beat(ctx); err != nil {
		t.Fatal(err)
	}
	if got := hs[0].Replicas(); got != 2 {
		t.Fatalf("replicas after one left = %d, want 2", got)
	}

	// b stops beating: counted out once its announcement expired (three
	// intervals), while a keeps beating.
	deadline := time.Now().Add(10 * time.Second)
	for hs[0].Replicas() != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("replicas = %d 10s after b stopped beating, want 1", hs[0].Replicas())
		}
		time.Sleep(interval)
		if err := hs[0].Beat(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCountKeptWhenRedisGoes: the count last read stays when Redis stops
// answering (the count known before the outage), and Start's beats
// resume counting when it is back.
func TestCountKeptWhenRedisGoes(t *testing.T) {
	r := redistest.StartServer(t)
	ctx := context.Background()
	other := New(r.Client(), Config{Interval: time.Minute, ID: "other"})
	if err := other.Beat(ctx); err != nil {
		t.Fatal(err)
	}
	c := r.Client()
	t.Cleanup(func() { c.Close() })
	h := New(c, Config{Interval: 50 * time.Millisecond, Timeout: 200 * time.Millisecond})
	h.Start()
	t.Cleanup(func() { h.Close() })
	waitCount(t, h, 2)

	r.Kill()
	time.Sleep(300 * time.Millisecond) // several failed beats
	if err := h.Beat(ctx); err == nil {
		t.Fatal("a beat succeeded with Redis killed")
	}
	if got := h.Replicas(); got != 2 {
		t.Fatalf("replicas during the outage = %d, want the 2 seen before it", got)
	}

	r.Restart() // the set is gone with Redis' memory: h alone re-announces
	waitCount(t, h, 1)
}

// waitCount polls h's count until it is want, for at most 10s.
func waitCount(t *testing.T, h *Heartbeat, want int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for h.Replicas() != want {
		if time.Now().After(deadline) {
			t.Fatalf("replicas = %d, want %d within 10s", h.Replicas(), want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestCloseWithoutStart leaves the set without a running beat, and a
// second Close does nothing.
func TestCloseWithoutStart(t *testing.T) {
	r := redistest.StartServer(t)
	ctx := context.Background()
	h := New(r.Client(), Config{ID: "solo"})
	if err := h.Beat(ctx); err != nil {
		t.Fatal(err)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if n, _ := r.Client().ZCard(ctx, h.key).Result(); n != 0 {
		t.Errorf("ZCARD after Close = %d, want 0", n)
	}
	if h.cfg.ID != "solo" {
		t.Errorf("ID %q", h.cfg.ID)
	}
}

// TestCluster: the set is one key, so one slot: the MULTI of a beat runs
// on a Redis Cluster as on one Redis.
func TestCluster(t *testing.T) {
	c := redistest.StartCluster(t, 3, 0)
	ctx := context.Background()
	var hs []*Heartbeat
	for i := range 2 {
		cl := c.Client()
		t.Cleanup(func() { cl.Close() })
		hs = append(hs, New(cl, Config{Prefix: "fg:", ID: string(rune('a' + i))}))
	}
	for _, h := range append(hs, hs[0]) {
		if err := h.Beat(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if got := hs[0].Replicas(); got != 2 {
		t.Fatalf("replicas on a cluster = %d, want 2", got)
	}
}
