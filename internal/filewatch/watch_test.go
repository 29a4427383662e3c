package filewatch

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// waitTimeout bounds how long a test waits for the watcher; a reload takes
// about DebounceQuiet, but a loaded machine running -race may be slow.
const waitTimeout = 10 * time.Second

// quietFor is how long a test waits to be sure that nothing happens: well
// past the longest debounce.
const quietFor = 3 * DebounceMax

// probe records what a Watcher does. Its Load reads the watched paths
// (every file of a folder, by name) into one string; content starting with
// "bad" fails to load, as a file that does not parse.
type probe struct {
	paths  []string
	match  func(name string) bool // of a folder's files; nil: not a dot-file
	loads  atomic.Int32           // calls of Load
	values chan string
	errs   chan error
}

func newProbe(paths ...string) *probe {
	return &probe{
		paths:  paths,
		match:  func(name string) bool { return !strings.HasPrefix(name, ".") },
		values: make(chan string, 100),
		errs:   make(chan error, 100),
	}
}

func (p *probe) load() (*string, error) {
	p.loads.Add(1)
	var parts []string
	for _, path := range p.paths {
		files := []string{path}
		if st, err := os.Stat(path); err == nil && st.IsDir() {
			entries, err := os.ReadDir(path)
			if err != nil {
				return nil, err
			}
			files = files[:0]
			for _, e := range entries {
				if p.match(e.Name()) {
					files = append(files, filepath.Join(path, e.Name()))
				}
			}
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				return nil, err
			}
			if strings.HasPrefix(string(b), "bad") {
				return nil, errors.New(filepath.Base(f) + ": does not parse")
			}
			parts = append(parts, string(b))
		}
	}
	s := strings.Join(parts, "+")
	return &s, nil
}

func (p *probe) options() Options[string] {
	return Options[string]{
		Paths:   p.paths,
		Match:   p.match,
		Load:    p.load,
		OnLoad:  func(s *string) { p.values <- *s },
		OnError: func(err error) { p.errs <- err },
	}
}

// watch starts a Watcher with o, closed when the test ends, and takes the
// first value's report.
func (p *probe) watch(t *testing.T, o Options[string]) *Watcher[string] {
	t.Helper()
	w, err := Watch(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	select {
	case <-p.values:
	default:
		t.Fatal("Watch returned before OnLoad had the first value")
	}
	return w
}

// value waits for the next OnLoad and checks it.
func (p *probe) value(t *testing.T, want string) {
	t.Helper()
	select {
	case got := <-p.values:
		if got != want {
			t.Fatalf("loaded %q, want %q", got, want)
		}
	case err := <-p.errs:
		t.Fatalf("want a load of %q, got error %v", want, err)
	case <-time.After(waitTimeout):
		t.Fatalf("no load of %q within %v", want, waitTimeout)
	}
}

// failure waits for the next OnError.
func (p *probe) failure(t *testing.T) error {
	t.Helper()
	select {
	case got := <-p.values:
		t.Fatalf("want an error, got a load of %q", got)
	case err := <-p.errs:
		return err
	case <-time.After(waitTimeout):
		t.Fatalf("no error within %v", waitTimeout)
	}
	return nil
}

// quiet fails when Load is called, or anything reported, within quietFor.
func (p *probe) quiet(t *testing.T, what string) {
	t.Helper()
	before := p.loads.Load()
	select {
	case got := <-p.values:
		t.Fatalf("%s: a load of %q", what, got)
	case err := <-p.errs:
		t.Fatalf("%s: an error %v", what, err)
	case <-time.After(quietFor):
	}
	if n := p.loads.Load() - before; n != 0 {
		t.Fatalf("%s: Load called %d times, want 0", what, n)
	}
}

func write(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// writeAtomic saves as editors and rotation tools do: a temporary file in
// the same folder renamed over the old one.
func writeAtomic(t *testing.T, path, body string) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	write(t, tmp, body)
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

func TestWriteInPlace(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "tokens")
	write(t, path, "v1")
	p := newProbe(path)
	w := p.watch(t, p.options())
	if got := *w.Current(); got != "v1" {
		t.Fatalf("Current = %q, want v1", got)
	}
	write(t, path, "v2")
	p.value(t, "v2")
	if got := *w.Current(); got != "v2" {
		t.Fatalf("Current = %q, want v2", got)
	}
}

func TestRenameOver(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "tls.crt")
	write(t, path, "v1")
	p := newProbe(path)
	w := p.watch(t, p.options())
	for _, v := range []string{"v2", "v3"} {
		writeAtomic(t, path, v)
		p.value(t, v)
		if got := *w.Current(); got != v {
			t.Fatalf("Current = %q, want %s", got, v)
		}
	}
}

// TestSeveralFolders: files in different folders (a certificate, its key
// and a CA bundle elsewhere) are one value; a change to any reloads it.
func TestSeveralFolders(t *testing.T) {
	t.Parallel()
	a, b := t.TempDir(), t.TempDir()
	cert, key, ca := filepath.Join(a, "tls.crt"), filepath.Join(a, "tls.key"), filepath.Join(b, "ca.crt")
	write(t, cert, "c1")
	write(t, key, "k1")
	write(t, ca, "a1")
	p := newProbe(cert, key, ca)
	p.watch(t, p.options())
	writeAtomic(t, ca, "a2")
	p.value(t, "c1+k1+a2")
	writeAtomic(t, key, "k2")
	p.value(t, "c1+k2+a2")
}

// kubeMount writes files the way the kubelet projects a ConfigMap or a
// Secret: into a new timestamped folder, with "..data" swapped to it by a
// rename and each visible file a symlink through "..data".
func kubeMount(t *testing.T, dir, stamp string, files map[string]string) {
	t.Helper()
	if err := os.Mkdir(filepath.Join(dir, stamp), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range files {
		write(t, filepath.Join(dir, stamp, name), body)
	}
	tmp := filepath.Join(dir, "..data_tmp")
	symlink(t, stamp, tmp)
	if err := os.Rename(tmp, filepath.Join(dir, kubeData)); err != nil {
		t.Fatal(err)
	}
	for name := range files {
		link := filepath.Join(dir, name)
		if _, err := os.Lstat(link); err == nil {
			continue
		}
		symlink(t, filepath.Join(kubeData, name), link)
	}
}

func TestKubernetesSwap(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"file", "folder"} {
		t.Run(mode, func(t *testing.T) {
			dir := t.TempDir()
			kubeMount(t, dir, "..2026_01_01_00_00_00.000000001", map[string]string{"token": "v1"})
			watched := dir
			if mode == "file" {
				watched = filepath.Join(dir, "token")
			}
			p := newProbe(watched)
			p.watch(t, p.options())
			// The visible symlink never changes: only "..data" is swapped,
			// and the old folder removed.
			kubeMount(t, dir, "..2026_01_01_00_01_00.000000002", map[string]string{"token": "v2"})
			if err := os.RemoveAll(filepath.Join(dir, "..2026_01_01_00_00_00.000000001")); err != nil {
				t.Fatal(err)
			}
			p.value(t, "v2")
			kubeMount(t, dir, "..2026_01_01_00_02_00.000000003", map[string]string{"token": "v3"})
			p.value(t, "v3")
		})
	}
}

// TestSymlinkElsewhere: a file that is a symlink into another folder
// reloads when its target changes; other files beside the target do not.
func TestSymlinkElsewhere(t *testing.T) {
	t.Parallel()
	dir, elsewhere := t.TempDir(), t.TempDir()
	real := filepath.Join(elsewhere, "real")
	write(t, real, "v1")
	link := filepath.Join(dir, "tokens")
	symlink(t, real, link)
	p := newProbe(link)
	p.watch(t, p.options())
	writeAtomic(t, real, "v2")
	p.value(t, "v2")
	write(t, filepath.Join(elsewhere, "unrelated"), "x")
	p.quiet(t, "after writing beside the target")
}

func TestUnrelatedFiles(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"file", "folder"} {
		t.Run(mode, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "rules.yaml")
			write(t, path, "v1")
			p := newProbe(path)
			o := p.options()
			if mode == "folder" {
				p.paths = []string{dir}
				p.match = func(name string) bool { return strings.HasSuffix(name, ".yaml") }
				o = p.options()
			}
			p.watch(t, o)
			// The server's log, notes, an editor's swap and backup files
			// and their removal, a subfolder.
			for range 5 {
				for _, name := range []string{"floodgate.log", "notes.txt", ".rules.yaml.swp", "rules.yaml~"} {
					write(t, filepath.Join(dir, name), "x")
				}
				writeAtomic(t, filepath.Join(dir, "notes.txt"), "y")
			}
			if err := os.Remove(filepath.Join(dir, "rules.yaml~")); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
				t.Fatal(err)
			}
			p.quiet(t, "after writing other files")
			write(t, path, "v2")
			p.value(t, "v2")
		})
	}
}

// TestBurstIsOneLoad: writes in quick succession (an editor's save, a
// rotation of several files) cost one load.
func TestBurstIsOneLoad(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	write(t, cert, "c0")
	write(t, key, "k0")
	p := newProbe(cert, key)
	p.watch(t, p.options())
	for i := range 10 {
		write(t, cert, "c"+string(rune('0'+i)))
		writeAtomic(t, key, "k"+string(rune('0'+i)))
	}
	p.value(t, "c9+k9")
	p.quiet(t, "after the burst's load")
	if n := p.loads.Load(); n != 2 {
		t.Fatalf("Load called %d times, want 2 (the first load and one reload)", n)
	}
}

// TestFailedLoadKeepsValue: a file that does not load is reported once,
// the previous value stays, and the next good file loads.
func TestFailedLoadKeepsValue(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "tokens")
	write(t, path, "v1")
	p := newProbe(path)
	w := p.watch(t, p.options())
	write(t, path, "bad one")
	if err := p.failure(t); err == nil || !strings.Contains(err.Error(), "does not parse") {
		t.Fatalf("error = %v, want the Load's", err)
	}
	if got := *w.Current(); got != "v1" {
		t.Fatalf("Current = %q after a failed load, want v1", got)
	}
	// The same bytes again (and a touch): not loaded, not reported again.
	writeAtomic(t, path, "bad one")
	if err := os.Chtimes(path, time.Now(), time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	p.quiet(t, "after rewriting the same bad bytes")
	// A forced reload returns the error without reporting it again.
	if err := w.Reload(); err == nil {
		t.Fatal("Reload of a bad file = nil, want its error")
	}
	p.quiet(t, "after the forced reload")
	// Removed: reported, the previous value stays.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := p.failure(t); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("error = %v, want ErrNotExist", err)
	}
	writeAtomic(t, path, "v2")
	p.value(t, "v2")
}

func TestWatchErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "tokens")
	write(t, path, "bad")
	p := newProbe(path)
	if w, err := Watch(t.Context(), p.options()); err == nil || w != nil {
		t.Fatalf("Watch of a bad file = %v, %v; want nil and an error", w, err)
	}
	if _, err := Watch(t.Context(), newProbe(filepath.Join(dir, "missing")).options()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Watch of a missing file: %v, want ErrNotExist", err)
	}
	if _, err := Watch(t.Context(), Options[string]{Paths: []string{path}}); err == nil {
		t.Fatal("Watch without Load = nil error")
	}
	if n := p.loads.Load(); n != 1 {
		t.Fatalf("Load called %d times, want 1", n)
	}
}

// TestReloadForced: Reload loads unchanged files; Unchanged keeps the
// current value and silences the report.
func TestReloadForced(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "tokens")
	write(t, path, "v1")
	p := newProbe(path)
	o := p.options()
	o.Unchanged = func(cur, next *string) bool { return *cur == *next }
	w := p.watch(t, o)
	first := w.Current()
	if err := w.Reload(); err != nil {
		t.Fatal(err)
	}
	if n := p.loads.Load(); n != 2 {
		t.Fatalf("Load called %d times, want 2", n)
	}
	if w.Current() != first {
		t.Fatal("an unchanged reload replaced the value")
	}
	select {
	case v := <-p.values:
		t.Fatalf("an unchanged reload was reported: %q", v)
	default:
	}
}

// TestPoll: with no file events (a filesystem that sends none), the poll
// sees changes, and skips files whose bytes did not change.
func TestPoll(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "tokens")
	write(t, path, "v1")
	p := newProbe(path)
	o := p.options()
	o.Poll = 20 * time.Millisecond
	o.noEvents = true
	w, err := Watch(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	<-p.values
	var we *WatchError
	if err := p.failure(t); !errors.As(err, &we) {
		t.Fatalf("reported %v, want a *WatchError saying events are off", err)
	}
	write(t, path, "v2")
	p.value(t, "v2")
	// Touched, same bytes: polled (read and hashed) but not loaded.
	if err := os.Chtimes(path, time.Now(), time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	p.quiet(t, "after a touch")
	writeAtomic(t, path, "v3")
	p.value(t, "v3")
}

// TestFolderRecreated: a watched folder deleted and created again (its
// watch lost with it) is watched again, and its new file loaded.
func TestFolderRecreated(t *testing.T) {
	t.Parallel()
	parent := t.TempDir()
	dir := filepath.Join(parent, "secrets")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "tokens")
	write(t, path, "v1")
	p := newProbe(path)
	o := p.options()
	o.Poll = 50 * time.Millisecond
	w := p.watch(t, o)
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := p.failure(t); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("error = %v, want ErrNotExist", err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, path, "v2")
	p.value(t, "v2")
	w.mu.Lock()
	watched := slices.Contains(w.fsw.WatchList(), dir)
	w.mu.Unlock()
	if !watched {
		t.Fatalf("%s not watched again after it was created again", dir)
	}
}

func TestClose(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "tokens")
	write(t, path, "v1")
	p := newProbe(path)
	o := p.options()
	o.Poll = 10 * time.Millisecond
	w := p.watch(t, o)
	if err := w.Close(); err != nil {
		t.Fatalf("Close = %v", err)
	}
	select {
	case <-w.done:
	default:
		t.Fatal("the Watcher's goroutine runs after Close")
	}
	if err := w.Close(); err != nil {
		t.Fatalf("second Close = %v", err)
	}
	write(t, path, "v2")
	p.quiet(t, "after Close")
	if err := w.Reload(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Reload after Close = %v, want ErrClosed", err)
	}
	if got := *w.Current(); got != "v1" {
		t.Fatalf("Current after Close = %q, want v1", got)
	}
}

// TestContextEnds: the Watcher stops with its context, as with Close.
func TestContextEnds(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "tokens")
	write(t, path, "v1")
	p := newProbe(path)
	ctx, cancel := context.WithCancel(t.Context())
	o := p.options()
	w, err := Watch(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	<-p.values
	cancel()
	select {
	case <-w.done:
	case <-time.After(waitTimeout):
		t.Fatal("the Watcher did not stop with its context")
	}
	write(t, path, "v2")
	p.quiet(t, "after the context ended")
	if err := w.Close(); err != nil {
		t.Fatalf("Close = %v", err)
	}
}

// TestRelevant: which event names can change the files, for a file, a
// folder, a symlink into another folder and a Kubernetes mount.
func TestRelevant(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	files, folder, other, kube := filepath.Join(root, "files"), filepath.Join(root, "folder"), filepath.Join(root, "other"), filepath.Join(root, "kube")
	for _, d := range []string{files, folder, other, kube} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write(t, filepath.Join(files, "tls.crt"), "c")
	write(t, filepath.Join(other, "real.key"), "k")
	symlink(t, filepath.Join(other, "real.key"), filepath.Join(files, "tls.key"))
	write(t, filepath.Join(folder, "a.yaml"), "a")
	kubeMount(t, kube, "..2026_01_01", map[string]string{"token": "t"})
	s, err := newFileSet([]string{filepath.Join(files, "tls.crt"), filepath.Join(files, "tls.key"), folder, filepath.Join(kube, "token")},
		func(name string) bool { return strings.HasSuffix(name, ".yaml") })
	if err != nil {
		t.Fatal(err)
	}
	if errs := s.refresh(nil); errs != nil {
		t.Fatal(errs)
	}
	tests := []struct {
		name string
		want bool
	}{
		{filepath.Join(files, "tls.crt"), true},
		{filepath.Join(files, "tls.key"), true},
		{filepath.Join(files, "tls.crt.tmp"), false},
		{filepath.Join(files, "floodgate.log"), false},
		{filepath.Join(files, "b.yaml"), false}, // a file's folder is not a folder of files
		{filepath.Join(files, kubeData), true},
		{files, true}, // the folder itself, deleted or moved
		{filepath.Join(other, "real.key"), true},
		{filepath.Join(other, "other.key"), false},
		{filepath.Join(other, kubeData), false}, // a target's folder is not a mount
		{filepath.Join(folder, "a.yaml"), true},
		{filepath.Join(folder, "new.yaml"), true},
		{filepath.Join(folder, "notes.txt"), false},
		{filepath.Join(folder, ".a.yaml.swp"), false},
		{filepath.Join(folder, "sub", "a.yaml"), false},
		{folder, true},
		{filepath.Join(kube, kubeData), true},
		{filepath.Join(kube, "token"), true},
		{filepath.Join(kube, "..2026_01_01", "token"), true},
		{filepath.Join(kube, "..2026_01_01", "other"), false},
		{filepath.Join(kube, "..data_tmp"), false},
		{root, false},
	}
	for _, tc := range tests {
		if got := s.relevant(tc.name); got != tc.want {
			t.Errorf("relevant(%s) = %v, want %v", tc.name, got, tc.want)
		}
	}
}
