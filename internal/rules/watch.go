package rules

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/floodgate/floodgate/internal/filewatch"
)

// Watch loads path (see Load) and then reloads it whenever its
// files change, until ctx ends or the watcher is closed. It fails when the
// first load fails. onLoad is called with every config that becomes
// current, the first one included (before Watch returns), and onError with
// every rejected reload (and *filewatch.WatchError when file events are
// unavailable); both may be nil, and are called from one goroutine at a
// time. A reload whose files are byte-for-byte unchanged (Set.Digest) is
// not reported. The watcher's Reload loads the config now, whether or not
// its files changed (for a SIGHUP): an invalid one is returned and
// reported through onError, and the previous config keeps serving.
//
// It watches the config's folder, the way internal/filewatch keeps every
// file-backed setting (so editors that save by renaming, and new files in
// a watched folder, are seen), but reacts only to the config files
// themselves, to the files that symlinked config files point to (in
// whatever folder they are), and to the "..data" symlink of a Kubernetes
// ConfigMap mount, whose swap to a new "..2026_xx" folder is how the
// kubelet updates it. Other files in the folder (the server's own log,
// say) never cause a reload. A valid change is live within about
// filewatch.DebounceQuiet (or, where the filesystem sends no events, at
// the next filewatch.DefaultPoll).
func Watch(ctx context.Context, path string, o Options, onLoad func(*Set), onError func(error)) (*filewatch.Watcher[Set], error) {
	if onError == nil {
		onError = func(error) {}
	}
	paths, match := []string{path}, isConfigName
	if o.AnyFile {
		// The sub-folders there are now are watched too; one made later
		// is read at the next reload (a change elsewhere, or SIGHUP).
		_, folders, _ := walkDir(path)
		paths, match = append(paths, folders...), nil // filewatch's default: every name not starting with '.'
	}
	return filewatch.Watch(ctx, filewatch.Options[Set]{
		Paths:     paths,
		Match:     match,
		Load:      func() (*Set, error) { return Load(path, o) },
		Unchanged: func(cur, next *Set) bool { return cur.Digest() == next.Digest() },
		OnLoad:    onLoad,
		OnError:   func(err error) { onError(reloadError(path, err)) },
	})
}

// reloadError says what a failed reload of path means for the server.
func reloadError(path string, err error) error {
	if _, ok := errors.AsType[*filewatch.WatchError](err); ok {
		return err
	}
	if errors.Is(err, os.ErrNotExist) {
		// Mid-swap or removed: keep serving; a later change reloads.
		return fmt.Errorf("reload of %s failed, keeping the previous config: %w", path, err)
	}
	return fmt.Errorf("reload of %s rejected, keeping the previous config: %w", path, err)
}
