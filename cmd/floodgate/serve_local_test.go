package main

import (
	"testing"
	"time"

	"github.com/floodgate/floodgate/internal/heartbeat"
)

// TestLocalReplicaCount: --replicas wins; without it, the heartbeat's
// count; before any heartbeat (the embedded store, or Redis never
// reached) one replica.
func TestLocalReplicaCount(t *testing.T) {
	var f serveFlags
	f.local.heartbeat = time.Second
	l := newLocalFailure(f)
	if got := l.share.Replicas(); got != 1 {
		t.Errorf("no count: %d replicas, want 1", got)
	}
	l.beat.Store(heartbeat.New(nil, heartbeat.Config{})) // never beaten: counts 0
	if got := l.share.Replicas(); got != 1 {
		t.Errorf("heartbeat that never read a count: %d replicas, want 1", got)
	}
	f.local.replicas = 4
	if got := newLocalFailure(f).share.Replicas(); got != 4 {
		t.Errorf("--replicas 4: %d replicas, want 4", got)
	}
}
