package rules

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Debounce timings: a reload runs debounceQuiet after the last file event,
// and never later than debounceMax after the first one, so an editor's
// burst of writes (or a Kubernetes symlink swap) costs one reload.
const (
	debounceQuiet = 100 * time.Millisecond
	debounceMax   = 500 * time.Millisecond
)

// Watcher keeps the config at a path current. It watches the config's
// folder (so editors that save by renaming, and new files in a watched
// folder, are seen) but reacts only to the config files themselves, to
// the files that symlinked config files point to (in whatever folder they
// are), and to the "..data" symlink of a Kubernetes ConfigMap mount,
// whose swap to a new "..2026_xx" folder is how the kubelet updates it.
// Other files in the folder (the server's own log, say) never cause a
// reload. A valid change is live within about debounceQuiet; an invalid
// one is reported through onError and the previous config keeps serving.
type Watcher struct {
	path    string
	dir     string // the folder watched: path itself, or the file's folder (absolute)
	isDir   bool
	fsw     *fsnotify.Watcher
	onLoad  func(*Config)
	onError func(error)
	stop    context.CancelFunc
	done    chan struct{}
	once    sync.Once
	err     error
	cur     atomic.Pointer[Config]

	// Owned by the watcher's goroutine once it runs (see refresh).
	targets map[string]bool // where symlinked config files point
	extra   map[string]bool // folders watched for targets, beyond dir
}

// kubeData is the symlink a ConfigMap mount swaps on every update.
const kubeData = "..data"

// Watch loads path (see Load) and then reloads it whenever its files
// change, until ctx ends or Close is called. It fails when the first load
// fails. onLoad is called with every config that becomes current, the first
// one included (before Watch returns), and onError with every rejected
// reload; both may be nil, and are called from one goroutine at a time. A
// reload whose files are byte-for-byte unchanged (Config.Digest) is not
// reported.
func Watch(ctx context.Context, path string, onLoad func(*Config), onError func(error)) (*Watcher, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("watching %s: %w", path, err)
	}
	st, err := os.Stat(abs)
	if err != nil {
		return nil, err
	}
	if onLoad == nil {
		onLoad = func(*Config) {}
	}
	if onError == nil {
		onError = func(error) {}
	}
	w := &Watcher{path: path, dir: abs, isDir: st.IsDir(), onLoad: onLoad, onError: onError, done: make(chan struct{})}
	if !w.isDir {
		w.dir = filepath.Dir(abs)
	}
	if w.fsw, err = fsnotify.NewWatcher(); err != nil {
		return nil, fmt.Errorf("watching %s: %w", path, err)
	}
	if err := w.fsw.Add(w.dir); err != nil {
		w.fsw.Close()
		return nil, fmt.Errorf("watching %s: %w", w.dir, err)
	}
	w.refresh() // before the load, so that no edit falls between the two
	cfg, err := Load(path)
	if err != nil {
		w.fsw.Close()
		return nil, err
	}
	ctx, w.stop = context.WithCancel(ctx)
	w.cur.Store(cfg)
	onLoad(cfg)
	go w.run(ctx)
	return w, nil
}

// configFiles lists the paths whose targets refresh follows: the file, or
// the folder's config-file names (as listDir picks them, unchecked).
func (w *Watcher) configFiles() []string {
	if !w.isDir {
		return []string{filepath.Join(w.dir, filepath.Base(w.path))}
	}
	entries, err := os.ReadDir(w.dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		if isConfigName(e.Name()) {
			out = append(out, filepath.Join(w.dir, e.Name()))
		}
	}
	return out
}

// refresh follows every symlinked config file to its target and watches
// the targets' folders, dropping folders no longer needed. It runs before
// every load, so a link pointed elsewhere is followed from then on.
func (w *Watcher) refresh() {
	targets, extra := map[string]bool{}, map[string]bool{}
	realDir, _ := filepath.EvalSymlinks(w.dir)
	for _, f := range w.configFiles() {
		if st, err := os.Lstat(f); err != nil || st.Mode()&os.ModeSymlink == 0 {
			continue
		}
		real, err := filepath.EvalSymlinks(f)
		if err != nil {
			continue // dangling for now; the load reports it
		}
		rdir := filepath.Dir(real)
		if rdir == realDir {
			targets[filepath.Join(w.dir, filepath.Base(real))] = true // named as events in dir are
			continue
		}
		targets[real] = true
		extra[rdir] = true
	}
	for d := range w.extra {
		if !extra[d] {
			_ = w.fsw.Remove(d) // fails when the folder is gone already
		}
	}
	for d := range extra {
		if !w.extra[d] {
			if err := w.fsw.Add(d); err != nil {
				delete(extra, d) // tried again at the next refresh
			}
		}
	}
	w.targets, w.extra = targets, extra
}

// relevant reports whether an event on name can change the config.
func (w *Watcher) relevant(name string) bool {
	name = filepath.Clean(name)
	if w.targets[name] {
		return true
	}
	if filepath.Dir(name) != w.dir {
		return false
	}
	base := filepath.Base(name)
	switch {
	case base == kubeData:
		return true
	case w.isDir:
		return isConfigName(base)
	}
	return base == filepath.Base(w.path)
}

// Current returns the config in force. It never blocks.
func (w *Watcher) Current() *Config { return w.cur.Load() }

// Close stops watching and waits for the watcher's goroutine to end. It is
// safe to call more than once.
func (w *Watcher) Close() error {
	w.once.Do(func() {
		w.stop()
		<-w.done
	})
	return w.err
}

func (w *Watcher) run(ctx context.Context) {
	defer close(w.done)
	defer func() { w.err = w.fsw.Close() }()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	var first time.Time // of the pending burst; zero when none
	for {
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case ev, ok := <-w.fsw.Events:
			if !ok {
				return
			}
			if ev.Op == fsnotify.Chmod || !w.relevant(ev.Name) {
				continue
			}
			now := time.Now()
			if first.IsZero() {
				first = now
			}
			wait := debounceQuiet
			if rest := debounceMax - now.Sub(first); rest < wait {
				wait = max(rest, 0)
			}
			timer.Reset(wait)
		case err, ok := <-w.fsw.Errors:
			if !ok {
				return
			}
			w.onError(fmt.Errorf("watching %s: %w", w.path, err))
		case <-timer.C:
			first = time.Time{}
			w.reload()
		}
	}
}

func (w *Watcher) reload() {
	w.refresh()
	cfg, err := Load(w.path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			// Mid-swap or removed: keep serving; a later event reloads.
			err = fmt.Errorf("reload of %s failed, keeping the previous config: %w", w.path, err)
		} else {
			err = fmt.Errorf("reload of %s rejected, keeping the previous config: %w", w.path, err)
		}
		w.onError(err)
		return
	}
	if cfg.Digest() == w.cur.Load().Digest() {
		return
	}
	w.cur.Store(cfg)
	w.onLoad(cfg)
}
