package filewatch

import (
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/fsnotify/fsnotify"
)

// kubeData is the symlink a Kubernetes ConfigMap or Secret mount swaps on
// every update.
const kubeData = "..data"

// digest is a fingerprint of the files' contents.
type digest [sha256.Size]byte

// fileSet is what a Watcher watches: some files and some folders (of which
// the entries Match accepts count), the folders holding them, and where
// their symlinks point. Its methods are called with the Watcher's mutex
// held.
type fileSet struct {
	files   []string        // absolute paths of the files given
	folders []string        // absolute paths of the folders given
	dirs    map[string]bool // folders always watched: folders and the files' folders
	match   func(name string) bool

	targets map[string]bool // where symlinked files point, as events name them
	extra   map[string]bool // folders watched for targets, beyond dirs
}

// newFileSet makes paths absolute and clean, for comparing with event
// names, and sorts them into files and folders (following symlinks).
func newFileSet(paths []string, match func(string) bool) (*fileSet, error) {
	s := &fileSet{dirs: map[string]bool{}, match: match}
	for _, path := range paths {
		p, err := filepath.Abs(path)
		if err != nil {
			return nil, fmt.Errorf("watching %s: %w", path, err)
		}
		st, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if st.IsDir() {
			s.folders = append(s.folders, p)
			s.dirs[p] = true
		} else {
			s.files = append(s.files, p)
			s.dirs[filepath.Dir(p)] = true
		}
	}
	return s, nil
}

// each calls fn with every file that counts now: the files given, and the
// matching entries of the folders, in a stable order. A folder that cannot
// be listed is passed to fn with its error.
func (s *fileSet) each(fn func(path string, err error)) {
	for _, f := range s.files {
		fn(f, nil)
	}
	for _, d := range s.folders {
		entries, err := os.ReadDir(d) // sorted by name
		if err != nil {
			fn(d, err)
			continue
		}
		for _, e := range entries {
			if s.match(e.Name()) {
				fn(filepath.Join(d, e.Name()), nil)
			}
		}
	}
}

// fingerprint hashes the names and contents of the files that count (an
// unreadable one by its error), following symlinks.
func (s *fileSet) fingerprint() digest {
	h := sha256.New()
	s.each(func(path string, err error) {
		if err == nil {
			var b []byte
			if b, err = os.ReadFile(path); err == nil {
				fmt.Fprintf(h, "%q %d\n", path, len(b))
				h.Write(b)
				return
			}
		}
		fmt.Fprintf(h, "%q error %q\n", path, err)
	})
	var d digest
	h.Sum(d[:0])
	return d
}

// refresh follows every symlinked file to its target and watches the
// targets' folders, dropping the folders no longer needed, and watches
// again any folder whose watch was lost (deleted and created again). It
// runs before every load, so a link pointed elsewhere is followed from
// then on, and returns the folders it could not watch (tried again at the
// next refresh). fsw may be nil (no file events): targets are still kept.
func (s *fileSet) refresh(fsw *fsnotify.Watcher) []*WatchError {
	targets, extra := map[string]bool{}, map[string]bool{}
	s.each(func(f string, err error) {
		if err != nil {
			return
		}
		if st, err := os.Lstat(f); err != nil || st.Mode()&os.ModeSymlink == 0 {
			return
		}
		real, err := filepath.EvalSymlinks(f)
		if err != nil {
			return // dangling for now; the load reports it
		}
		dir := filepath.Dir(f)
		rdir := filepath.Dir(real)
		if realDir, _ := filepath.EvalSymlinks(dir); rdir == realDir {
			targets[filepath.Join(dir, filepath.Base(real))] = true // named as events in dir are
			return
		}
		targets[real] = true
		if !s.dirs[rdir] {
			extra[rdir] = true
		}
	})
	s.targets, s.extra = targets, extra
	if fsw == nil {
		return nil
	}
	watching := map[string]bool{}
	for _, d := range fsw.WatchList() {
		watching[d] = true
		if !s.dirs[d] && !extra[d] {
			_ = fsw.Remove(d) // fails when the folder is gone already
		}
	}
	var errs []*WatchError
	for _, want := range []map[string]bool{s.dirs, extra} {
		for d := range want {
			if watching[d] {
				continue
			}
			if err := fsw.Add(d); err != nil {
				errs = append(errs, &WatchError{Path: d, Err: err})
			}
		}
	}
	return errs
}

// relevant reports whether an event on name can change the files.
func (s *fileSet) relevant(name string) bool {
	name = filepath.Clean(name)
	if slices.Contains(s.files, name) || s.targets[name] || s.dirs[name] || s.extra[name] {
		// A watched folder itself: deleted or moved away, its watch is
		// gone; the load's refresh watches it again once it is back.
		return true
	}
	dir, base := filepath.Dir(name), filepath.Base(name)
	if !s.dirs[dir] {
		return false
	}
	return base == kubeData || (slices.Contains(s.folders, dir) && s.match(base))
}
