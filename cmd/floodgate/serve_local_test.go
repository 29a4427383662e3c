package main

import (
	"strings"
	"testing"
	"time"

	"github.com/floodgate/floodgate/internal/heartbeat"
)

func TestLocalFlags(t *testing.T) {
	for _, tc := range []struct {
		f   localFlags
		err string
	}{
		{localFlags{replicas: 0, heartbeat: time.Second}, ""},
		{localFlags{replicas: 3, heartbeat: 100 * time.Millisecond}, ""},
		{localFlags{replicas: -1, heartbeat: time.Second}, "--replicas must not be negative, got -1"},
		{localFlags{heartbeat: 0}, "--replicas-heartbeat must be positive, got 0s"},
	} {
		err := tc.f.check()
		if (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%+v: %v, want %q", tc.f, err, tc.err)
		}
	}
}

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
