package config

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

// Watcher keeps the config at a path current. It watches the folders, not
// only the files, so editors that save by renaming and Kubernetes ConfigMap
// updates (a new "..2026_xx" folder, then "..data" swapped to point at it)
// both trigger a reload. A valid change is live within about
// debounceQuiet; an invalid one is reported through onError and the
// previous config keeps serving.
type Watcher struct {
	path    string
	cur     atomic.Pointer[Config]
	fsw     *fsnotify.Watcher
	onLoad  func(*Config)
	onError func(error)
	stop    context.CancelFunc
	done    chan struct{}
	once    sync.Once
	err     error
}

// Watch loads path (see Load) and then reloads it whenever its files
// change, until ctx ends or Close is called. It fails when the first load
// fails. onLoad is called with every config that becomes current, the first
// one included (before Watch returns), and onError with every rejected
// reload; both may be nil, and are called from one goroutine at a time. A
// reload whose files are byte-for-byte unchanged (Config.Digest) is not
// reported.
func Watch(ctx context.Context, path string, onLoad func(*Config), onError func(error)) (*Watcher, error) {
	cfg, err := Load(path)
	if err != nil {
		return nil, err
	}
	fsw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("watching %s: %w", path, err)
	}
	for _, dir := range watchDirs(path) {
		if err := fsw.Add(dir); err != nil {
			fsw.Close()
			return nil, fmt.Errorf("watching %s: %w", dir, err)
		}
	}
	if onLoad == nil {
		onLoad = func(*Config) {}
	}
	if onError == nil {
		onError = func(error) {}
	}
	ctx, stop := context.WithCancel(ctx)
	w := &Watcher{path: path, fsw: fsw, onLoad: onLoad, onError: onError, stop: stop, done: make(chan struct{})}
	w.cur.Store(cfg)
	onLoad(cfg)
	go w.run(ctx)
	return w, nil
}

// watchDirs is the folder to watch for path: the folder itself, or the
// file's folder; plus, for a symlinked file, the folder its target is in.
func watchDirs(path string) []string {
	dir := path
	if st, err := os.Stat(path); err != nil || !st.IsDir() {
		dir = filepath.Dir(path)
	}
	dirs := []string{dir}
	if real, err := filepath.EvalSymlinks(path); err == nil {
		rdir := real
		if st, err := os.Stat(real); err != nil || !st.IsDir() {
			rdir = filepath.Dir(real)
		}
		if abs1, err1 := filepath.Abs(rdir); err1 == nil {
			if abs2, err2 := filepath.Abs(dir); err2 == nil && abs1 != abs2 {
				dirs = append(dirs, rdir)
			}
		}
	}
	return dirs
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
			if ev.Op == fsnotify.Chmod {
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
