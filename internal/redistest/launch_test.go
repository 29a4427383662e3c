package redistest

import (
	"strings"
	"testing"
)

// TestLaunchOnATakenPort: a server started on a port another server
// holds fails to start, though the other answers there: two servers
// starting at once may be handed the same free port, and a start that
// took the other's answer for its own would leave a cluster a node short.
func TestLaunchOnATakenPort(t *testing.T) {
	a := StartServer(t)
	b := &Server{t: t, dir: t.TempDir(), port: a.Port()}
	b.mu.Lock()
	err := b.launch()
	b.mu.Unlock()
	if err == nil {
		b.Stop()
		t.Fatalf("a second server on %s started; want it to fail", a.Addr())
	}
	if !strings.Contains(err.Error(), "exited during start") {
		t.Fatalf("launch: %v; want the start to fail as its process exits", err)
	}
}
