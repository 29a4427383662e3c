package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	floodgatev1 "github.com/floodgate/floodgate/gen/floodgate/v1"
	"github.com/floodgate/floodgate/internal/redistest"
)

// previousRelease is the commit CHANGELOG.md marks as v0.2.0.
const previousRelease = "79ed681"

// buildRelease builds the floodgate binary of commit rev from this
// repository's history (a detached git worktree, removed afterwards),
// once a machine and Go version (cachedBinary, keyed by the commit). A
// tree without that history skips the test, but under CI=true, which
// fails: CI runs on a full clone.
func buildRelease(t *testing.T, rev string) string {
	t.Helper()
	need := func(format string, args ...any) {
		t.Helper()
		if os.Getenv("CI") == "true" {
			t.Fatalf(format, args...)
		}
		t.Skipf(format, args...)
	}
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		need("no git repository to build %s from: %v", rev, err)
	}
	root := strings.TrimSpace(string(top))
	full, err := exec.Command("git", "-C", root, "rev-parse", "--verify", "--quiet", rev+"^{commit}").Output()
	if err != nil {
		need("commit %s is not in this clone's history: %v", rev, err)
	}
	commit := strings.TrimSpace(string(full))
	bin, err := cachedBinary("floodgate-"+rev, "commit "+commit+": go build -trimpath ./cmd/floodgate", t.TempDir(), func(dst string) error {
		dir := filepath.Join(t.TempDir(), "src")
		if out, err := exec.Command("git", "-C", root, "worktree", "add", "--detach", dir, commit).CombinedOutput(); err != nil {
			return fmt.Errorf("git worktree add %s: %v\n%s", rev, err, out)
		}
		defer exec.Command("git", "-C", root, "worktree", "remove", "--force", dir).Run()
		build := exec.Command("go", "build", "-trimpath", "-o", dst, "./cmd/floodgate")
		build.Dir = dir
		if b, err := build.CombinedOutput(); err != nil {
			return fmt.Errorf("building %s: %v\n%s", rev, err, b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// TestRollingUpgradeBesidePreviousRelease: replicas of the previous
// release and of this build share one Redis during a rollout, as
// CHANGELOG.md and docs/operations.md say. Four replicas, two of each,
// take 300 concurrent checks of one key of 100 a day per algorithm, the
// callers alternating between them: none fails or is degraded. The
// sliding windows and the leaky bucket keep their states' keys, so
// exactly 100 are allowed, a version's decisions counting from where the
// other's left off; the token bucket and the fixed window count in keys
// of their own in this build, so each version counts apart and the two
// together admit at most twice the limit. Once only this build decides,
// every limit admits exactly its count. A sliding window's and a leaky
// bucket's key is charged first by this build, whose state records the
// key's expiry (the codec's second form): the previous release decides
// on it.
func TestRollingUpgradeBesidePreviousRelease(t *testing.T) {
	old := buildRelease(t, previousRelease)
	r := redistest.StartServer(t)
	args := []string{"--redis-url", "redis://" + r.Addr(), "--failure-mode", "closed", "--redis-timeout", "5s"}
	var clients []floodgatev1.RateLimiterClient
	for i := range 4 {
		if i%2 == 0 {
			clients = append(clients, startBinary(t, old, args...).Client(t))
		} else {
			clients = append(clients, startServe(t, args...).Client(t))
		}
	}
	algs := append([]floodgatev1.Algorithm{floodgatev1.Algorithm_ALGORITHM_LEAKY_BUCKET}, clusterAlgorithms...)
	for _, alg := range algs {
		t.Run(alg.String(), func(t *testing.T) {
			req := &floodgatev1.CheckRequest{
				Key: "upgrade:" + alg.String(), Algorithm: alg,
				Source: &floodgatev1.CheckRequest_Limit{Limit: &floodgatev1.Limit{Requests: 100, Period: durationpb.New(24 * time.Hour)}},
			}
			shared := alg == floodgatev1.Algorithm_ALGORITHM_SLIDING_WINDOW || alg == floodgatev1.Algorithm_ALGORITHM_LEAKY_BUCKET
			checks, first := 300, 0
			if shared {
				// This build charges first: its state records the key's
				// expiry (the codec's second form, first byte 64 to
				// 127), which the previous release reads on.
				resp, err := clients[1].Check(context.Background(), req)
				if err != nil || !resp.Allowed || resp.Degraded {
					t.Fatalf("this build's first check: %v, %v", resp, err)
				}
				keys, err := r.Client().Keys(context.Background(), "*"+req.Key+"*").Result()
				if err != nil || len(keys) != 1 {
					t.Fatalf("the key of %s: %v, %v", req.Key, keys, err)
				}
				v, err := r.Client().Get(context.Background(), keys[0]).Result()
				if err != nil || len(v) < 2 || v[0] < 64 || v[0] >= 128 {
					t.Fatalf("this build wrote %q (%v), want a state in the second form", v, err)
				}
				checks, first = 299, 1
			}
			work := make(chan int, checks)
			for i := range checks {
				work <- i
			}
			close(work)
			var mu sync.Mutex
			allowed, degraded := first, 0
			byVersion := [2]int{0, first}
			var wg sync.WaitGroup
			for w := range 32 {
				wg.Go(func() {
					for i := range work {
						c := clients[(w+i)%len(clients)]
						ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
						resp, err := c.Check(ctx, req)
						cancel()
						if err != nil {
							t.Error(err)
							return
						}
						mu.Lock()
						if resp.Degraded {
							degraded++
						} else if resp.Allowed {
							allowed++
							byVersion[(w+i)%2]++
						}
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			apart := alg == floodgatev1.Algorithm_ALGORITHM_TOKEN_BUCKET || alg == floodgatev1.Algorithm_ALGORITHM_FIXED_WINDOW
			switch {
			case degraded != 0:
				t.Fatalf("%d allowed and %d degraded of 300 across the two versions, want none degraded", allowed, degraded)
			case apart && (allowed < 100 || allowed > 200):
				t.Fatalf("%d allowed of 300 across the two versions, want 100 to 200 (each version counts apart)", allowed)
			case !apart && allowed != 100:
				t.Fatalf("%d allowed of 300 across the two versions, want exactly 100", allowed)
			case byVersion[0] == 0 || byVersion[1] == 0:
				t.Fatalf("allowed by the previous release %d, by this build %d: want both to have decided", byVersion[0], byVersion[1])
			}
			// This build alone, as after the rollout: exactly the limit.
			req.Key = "after:" + alg.String()
			allowed = 0
			for i := range 150 {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				resp, err := clients[1+2*(i%2)].Check(ctx, req)
				cancel()
				if err != nil {
					t.Fatal(err)
				}
				if resp.Allowed && !resp.Degraded {
					allowed++
				}
			}
			if allowed != 100 {
				t.Fatalf("this build alone: %d allowed of 150, want exactly 100", allowed)
			}
		})
	}
}
