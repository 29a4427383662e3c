package rules

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// waitTimeout bounds how long a test waits for the watcher. The design
// goal is a reload within a second (filewatch.DebounceQuiet is 100ms); the
// bound is generous so a loaded CI machine running -race cannot flake it.
const waitTimeout = 10 * time.Second

type events struct {
	loads chan *Set
	errs  chan error
}

func newEvents() *events {
	return &events{loads: make(chan *Set, 100), errs: make(chan error, 100)}
}

func (ev *events) onLoad(c *Set)     { ev.loads <- c }
func (ev *events) onError(err error) { ev.errs <- err }

func (ev *events) load(t *testing.T) *Set {
	t.Helper()
	start := time.Now()
	select {
	case c := <-ev.loads:
		t.Logf("reloaded after %v", time.Since(start))
		return c
	case err := <-ev.errs:
		t.Fatalf("want a reload, got error: %v", err)
	case <-time.After(waitTimeout):
		t.Fatalf("no reload within %v", waitTimeout)
	}
	return nil
}

func (ev *events) err(t *testing.T) error {
	t.Helper()
	select {
	case c := <-ev.loads:
		t.Fatalf("want an error, got a reload of %v", c.Domains())
	case err := <-ev.errs:
		return err
	case <-time.After(waitTimeout):
		t.Fatalf("no error within %v", waitTimeout)
	}
	return nil
}

func rules(requests int) string {
	return "domain: w\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: " + strconv.Itoa(requests) + "}\n"
}

func requestsOf(t *testing.T, c *Set) int64 {
	t.Helper()
	return one(t, c, "w", e("k", "v")...).Rate.Requests
}

// writeAtomic saves like most editors and config tools: a temporary file
// renamed over the old one.
func writeAtomic(t *testing.T, path, body string) {
	t.Helper()
	tmp := path + ".tmp~"
	if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func TestWatchFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "rules.yaml")
	writeFiles(t, dir, map[string]string{"rules.yaml": rules(1)})
	ev := newEvents()
	w, err := watch(t.Context(), path, ev.onLoad, ev.onError)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	select {
	case c := <-ev.loads:
		if c != current(w) {
			t.Error("the first onLoad is not Current()")
		}
	default:
		t.Fatal("Watch returned before calling onLoad with the first config")
	}
	if got := requestsOf(t, current(w)); got != 1 {
		t.Fatalf("requests = %d, want 1", got)
	}

	// A valid change in place.
	if err := os.WriteFile(path, []byte(rules(2)), 0o644); err != nil {
		t.Fatal(err)
	}
	c := ev.load(t)
	if got := requestsOf(t, c); got != 2 || current(w) != c {
		t.Fatalf("after the write: requests = %d (current is the new config: %v)", got, current(w) == c)
	}

	// An invalid change: reported, the previous config keeps serving.
	if err := os.WriteFile(path, []byte("domain: w\ndescriptors:\n  - key: k\n    rate_limit: {unit: sekond, requests_per_unit: 3}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err = ev.err(t)
	var ce *Error
	if !errors.As(err, &ce) || ce.Line != 4 || ce.Column != 24 {
		t.Errorf("error = %v, want one at 4:24", err)
	}
	if current(w) != c {
		t.Fatal("an invalid change replaced the config")
	}

	// An editor-style save (rename over the file) of a valid change.
	writeAtomic(t, path, rules(4))
	if got := requestsOf(t, ev.load(t)); got != 4 {
		t.Fatalf("after the rename: requests = %d, want 4", got)
	}
	if got := requestsOf(t, current(w)); got != 4 {
		t.Fatalf("Current: requests = %d, want 4", got)
	}
}

func TestWatchKubernetesSwap(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	kubeMount(t, dir, "..2026_01_01_00_00_00.000000001", map[string]string{"rules.yaml": rules(1)})
	ev := newEvents()
	w, err := watch(t.Context(), dir, ev.onLoad, ev.onError)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	<-ev.loads

	// The kubelet's update: a new timestamped folder, "..data" swapped to
	// it by a rename, the old folder removed. The visible rules.yaml
	// symlink itself never changes.
	kubeMount(t, dir, "..2026_01_01_00_01_00.000000002", map[string]string{"rules.yaml": rules(7)})
	if err := os.RemoveAll(filepath.Join(dir, "..2026_01_01_00_00_00.000000001")); err != nil {
		t.Fatal(err)
	}
	if got := requestsOf(t, ev.load(t)); got != 7 {
		t.Fatalf("after the swap: requests = %d, want 7", got)
	}
	// Watching a single file of the mount works the same way.
	ev2 := newEvents()
	w2, err := watch(t.Context(), filepath.Join(dir, "rules.yaml"), ev2.onLoad, ev2.onError)
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Close()
	<-ev2.loads
	kubeMount(t, dir, "..2026_01_01_00_02_00.000000003", map[string]string{"rules.yaml": rules(9)})
	if got := requestsOf(t, ev2.load(t)); got != 9 {
		t.Fatalf("file watch after the swap: requests = %d, want 9", got)
	}
}

func TestWatchFolderNewFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"a.yaml": rules(1)})
	ev := newEvents()
	w, err := watch(t.Context(), dir, ev.onLoad, ev.onError)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	<-ev.loads
	writeAtomic(t, filepath.Join(dir, "b.yaml"), "policies:\n  p: {requests_per_min: 1}\n")
	if _, ok := ev.load(t).Policy("p"); !ok {
		t.Fatal("policy from the new file missing")
	}
	// A second file with the same domain makes the folder invalid.
	writeAtomic(t, filepath.Join(dir, "c.yaml"), rules(3))
	if err := ev.err(t); !errors.Is(err, ErrInvalid) {
		t.Fatalf("error = %v, want ErrInvalid", err)
	}
	if got := requestsOf(t, current(w)); got != 1 {
		t.Fatalf("requests = %d, want 1 (the old config)", got)
	}
}

// TestWatchAnyFile: with AnyFile a watched folder reloads when a file of
// any name in a sub-folder changes, and never reads a name starting with
// '.' (a broken one there does not fail the reload).
func TestWatchAnyFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"sub/rules": rules(1), ".swp": "not: [yaml"})
	ev := newEvents()
	w, err := Watch(t.Context(), dir, Options{AnyFile: true}, ev.onLoad, ev.onError)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	<-ev.loads
	writeAtomic(t, filepath.Join(dir, "sub", "rules"), rules(2))
	if got := requestsOf(t, ev.load(t)); got != 2 {
		t.Fatalf("requests = %d, want 2", got)
	}
}

func TestWatchInitialError(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"a.yaml": "domain: ''\n"})
	w, err := watch(t.Context(), dir, nil, nil)
	if err == nil || w != nil || !errors.Is(err, ErrInvalid) {
		t.Fatalf("Watch = %v, %v; want nil, an ErrInvalid", w, err)
	}
	if _, err := watch(t.Context(), filepath.Join(dir, "missing"), nil, nil); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("watch(missing) = %v, want ErrNotExist", err)
	}
}

func TestWatchStops(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"a.yaml": rules(1)})
	ctx, cancel := context.WithCancel(t.Context())
	ev := newEvents()
	w, err := watch(ctx, dir, ev.onLoad, ev.onError)
	if err != nil {
		t.Fatal(err)
	}
	<-ev.loads
	cancel()
	if err := w.Close(); err != nil {
		t.Errorf("Close = %v", err)
	}
	if err := w.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "a.yaml"), []byte(rules(2)), 0o644); err != nil {
		t.Fatal(err)
	}
	if current(w) == nil || requestsOf(t, current(w)) != 1 {
		t.Error("Current changed after the watcher stopped")
	}
	select {
	case <-ev.loads:
		t.Error("onLoad after the watcher stopped")
	default:
	}
}
