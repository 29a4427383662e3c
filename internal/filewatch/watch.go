// Package filewatch keeps a value loaded from files current: the rules,
// the gRPC port's TLS certificate and the bearer token file all reload
// this one way, so a change is live DebounceQuiet after the write and the
// request path never reads a file.
//
// A Watcher watches its files' folders with fsnotify and reacts only to
// events that can change them: the files (written in place or replaced by
// a rename), their symlink targets, and a Kubernetes mount's "..data"
// symlink. Events are debounced. It also re-reads its files every
// Options.Poll for what fsnotify cannot see (NFS, FUSE and CSI volumes, a
// folder recreated, a queue overflow, no inotify watches left); a load is
// skipped when the files are byte-for-byte what the last attempt read.
// A failed load keeps the previous value; Current never blocks.
package filewatch

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Debounce timings: a load runs DebounceQuiet after the last relevant file
// event, and never later than DebounceMax after the first one of a burst.
const (
	DebounceQuiet = 100 * time.Millisecond
	DebounceMax   = 500 * time.Millisecond
)

// DefaultPoll is how often a Watcher re-reads its files when Options.Poll
// is zero.
const DefaultPoll = 10 * time.Second

// ErrClosed is returned by Reload once the Watcher has stopped.
var ErrClosed = errors.New("filewatch: watcher closed")

// Options say what a Watcher watches and how it loads its value.
type Options[T any] struct {
	// Paths are the files and folders read by Load (at least one). A file
	// counts by its path; a folder counts by the entries whose name Match
	// accepts. Whether a path is a folder is decided once, by Watch.
	Paths []string

	// Match picks, by name, the files of a folder in Paths that Load reads.
	// Nil means every name that does not start with a dot.
	Match func(name string) bool

	// Load reads the value from the files. It is called by Watch, after
	// every change, and by Reload; never by two goroutines at once.
	Load func() (*T, error)

	// Unchanged, when not nil, reports whether a newly loaded value is the
	// same as the current one; such a load keeps the current value and is
	// not reported.
	Unchanged func(cur, next *T) bool

	// OnLoad is called with every value that becomes current, the first
	// included. OnError is called with every failed load after the first
	// (once per unchanged files) and every *WatchError. Either may be nil;
	// neither is called concurrently or after the Watcher stops.
	OnLoad  func(*T)
	OnError func(error)

	// Poll is how often the files are re-read in case an event was missed:
	// zero means DefaultPoll, negative means never (events only).
	Poll time.Duration

	noEvents bool // tests: behave as if fsnotify were unavailable
}

// A WatchError is reported through OnError when file events are
// unavailable (fsnotify failed, or a folder could not be watched); changes
// are then seen by the poll only. It is not a failed load.
type WatchError struct {
	Path string        // the folder, or the first of Options.Paths
	Poll time.Duration // how often the files are re-read instead; 0 if events still flow
	Err  error
}

func (e *WatchError) Error() string {
	if e.Poll <= 0 {
		return fmt.Sprintf("watching %s: %v", e.Path, e.Err)
	}
	return fmt.Sprintf("watching %s: %v (the files are re-read every %v instead)", e.Path, e.Err, e.Poll)
}

// Unwrap returns the underlying error.
func (e *WatchError) Unwrap() error { return e.Err }

// Watcher holds the value loaded from a set of files and reloads it when
// they change, until its context ends or Close is called.
type Watcher[T any] struct {
	opts  Options[T]
	files *fileSet
	fsw   *fsnotify.Watcher // nil when file events are unavailable
	cur   atomic.Pointer[T]

	mu         sync.Mutex // serializes loads, callbacks and the fields below
	tried      digest     // the files' fingerprint at the last load attempt
	reportedAt digest     // fingerprint and error last reported by OnError
	reported   string     // "" since the last successful load
	stopped    bool

	stop context.CancelFunc
	done chan struct{}
	err  error // of closing fsw
}

// Watch loads the value and then reloads it whenever its files change,
// until ctx ends or Close is called. It fails when the first load fails or
// Options are incomplete, not when file events are unavailable and the
// poll is on (a *WatchError is reported).
func Watch[T any](ctx context.Context, o Options[T]) (*Watcher[T], error) {
	if len(o.Paths) == 0 || o.Load == nil {
		return nil, errors.New("filewatch: Paths and Load are required")
	}
	if o.Match == nil {
		o.Match = func(name string) bool { return name != "" && name[0] != '.' }
	}
	if o.OnLoad == nil {
		o.OnLoad = func(*T) {}
	}
	if o.OnError == nil {
		o.OnError = func(error) {}
	}
	o.Poll = cmp.Or(o.Poll, DefaultPoll)
	files, err := newFileSet(o.Paths, o.Match)
	if err != nil {
		return nil, err
	}
	w := &Watcher[T]{opts: o, files: files, done: make(chan struct{})}
	var watchErrs []*WatchError
	if o.noEvents {
		watchErrs = append(watchErrs, &WatchError{Path: o.Paths[0], Err: errors.New("file events turned off")})
	} else if w.fsw, err = fsnotify.NewWatcher(); err != nil {
		watchErrs = append(watchErrs, &WatchError{Path: o.Paths[0], Err: err})
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	// The watches are set before the first read, so that no edit falls
	// between the two.
	watchErrs = append(watchErrs, w.files.refresh(w.fsw)...)
	if len(watchErrs) > 0 && w.opts.Poll < 0 {
		w.closeEvents()
		return nil, watchErrs[0]
	}
	for _, e := range watchErrs {
		e.Poll = w.opts.Poll
	}
	fp := w.files.fingerprint()
	v, err := o.Load()
	if err != nil {
		w.closeEvents()
		return nil, err
	}
	w.tried = fp
	w.cur.Store(v)
	o.OnLoad(v)
	for _, e := range watchErrs {
		o.OnError(e)
	}
	ctx, w.stop = context.WithCancel(ctx)
	go w.run(ctx)
	return w, nil
}

// Current returns the value in force. It never blocks.
func (w *Watcher[T]) Current() *T { return w.cur.Load() }

// Reload loads the value now, whether or not the files changed (for a
// SIGHUP). A failure keeps the previous value and is returned (and
// reported, once). It returns ErrClosed once the Watcher has stopped.
func (w *Watcher[T]) Reload() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return ErrClosed
	}
	return w.load(true)
}

// Close stops watching and waits until the Watcher's goroutine has ended:
// no callback runs after it returns. It is safe to call more than once.
func (w *Watcher[T]) Close() error {
	w.stop()
	<-w.done
	return w.err
}

func (w *Watcher[T]) closeEvents() {
	if w.fsw != nil {
		w.err = w.fsw.Close()
	}
}

// run reacts to file events (debounced) and to the poll, until ctx ends.
func (w *Watcher[T]) run(ctx context.Context) {
	defer close(w.done)
	defer func() {
		w.mu.Lock()
		w.stopped = true
		w.closeEvents()
		w.mu.Unlock()
	}()
	var events <-chan fsnotify.Event
	var errs <-chan error
	if w.fsw != nil {
		events, errs = w.fsw.Events, w.fsw.Errors
	}
	var tick <-chan time.Time
	if w.opts.Poll > 0 {
		t := time.NewTicker(w.opts.Poll)
		defer t.Stop()
		tick = t.C
	}
	debounce := time.NewTimer(time.Hour)
	debounce.Stop()
	defer debounce.Stop()
	var first time.Time // of the pending burst; zero when none
	schedule := func() {
		now := time.Now()
		if first.IsZero() {
			first = now
		}
		debounce.Reset(max(min(DebounceQuiet, DebounceMax-now.Sub(first)), 0))
	}
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-events:
			if !ok {
				events = nil // the poll goes on
				continue
			}
			if ev.Op == fsnotify.Chmod || !w.relevant(ev.Name) {
				continue
			}
			schedule()
		case err, ok := <-errs:
			if !ok {
				errs = nil
				continue
			}
			// An overflow loses events: load to be sure (the fingerprint
			// skips it when nothing changed).
			w.mu.Lock()
			w.opts.OnError(&WatchError{Path: w.opts.Paths[0], Err: err})
			w.mu.Unlock()
			schedule()
		case <-debounce.C:
			first = time.Time{}
			w.loadIfChanged()
		case <-tick:
			w.loadIfChanged()
		}
	}
}

func (w *Watcher[T]) relevant(name string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.files.relevant(name)
}

func (w *Watcher[T]) loadIfChanged() {
	w.mu.Lock()
	defer w.mu.Unlock()
	_ = w.load(false) // reported through OnError
}

// load reloads the value when force is set or the files changed since the
// last attempt. w.mu is held.
func (w *Watcher[T]) load(force bool) error {
	_ = w.files.refresh(w.fsw) // failures are retried at the next load or poll
	// The fingerprint is taken before Load reads: a change in between makes
	// the next fingerprint differ, so it is loaded again, never missed.
	fp := w.files.fingerprint()
	if !force && fp == w.tried {
		return nil
	}
	w.tried = fp
	v, err := w.opts.Load()
	if err != nil {
		if w.reported != err.Error() || w.reportedAt != fp {
			w.reported, w.reportedAt = err.Error(), fp
			w.opts.OnError(err)
		}
		return err
	}
	w.reported = ""
	if w.opts.Unchanged != nil && w.opts.Unchanged(w.cur.Load(), v) {
		return nil
	}
	w.cur.Store(v)
	w.opts.OnLoad(v)
	return nil
}
