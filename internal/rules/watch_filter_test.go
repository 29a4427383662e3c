package rules

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/floodgate/floodgate/internal/filewatch"
)

// quiet fails when ev reports anything within d.
func (ev *events) quiet(t *testing.T, d time.Duration, what string) {
	t.Helper()
	select {
	case c := <-ev.loads:
		t.Fatalf("%s: a reload of %v", what, c.Domains())
	case err := <-ev.errs:
		t.Fatalf("%s: a reload attempt: %v", what, err)
	case <-time.After(d):
	}
}

// appendFile appends line to path, as a logger does.
func appendFile(t *testing.T, path, line string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Error(err)
		return
	}
	defer f.Close()
	if _, err := f.WriteString(line + "\n"); err != nil {
		t.Error(err)
	}
}

// TestWatchIgnoresOtherFiles: with the server's log in the config's folder,
// a broken config must be reported once, not reloaded every time the
// report is logged; other files written in the folder never reload.
func TestWatchIgnoresOtherFiles(t *testing.T) {
	t.Parallel()
	broken := "domain: w\ndescriptors:\n  - key: k\n    rate_limit: {unit: sekond, requests_per_unit: 3}\n"
	for _, mode := range []string{"file", "folder"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			writeFiles(t, dir, map[string]string{"rules.yaml": rules(1)})
			target := dir
			if mode == "file" {
				target = filepath.Join(dir, "rules.yaml")
			}
			logFile := filepath.Join(dir, "floodgate.log")
			ev := newEvents()
			w, err := watch(t.Context(), target, ev.onLoad, func(err error) {
				appendFile(t, logFile, "level=ERROR msg="+err.Error()) // the log lives beside the config
				ev.onError(err)
			})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			<-ev.loads

			if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), []byte(broken), 0o644); err != nil {
				t.Fatal(err)
			}
			ev.err(t)
			ev.quiet(t, 4*filewatch.DebounceMax, "after logging the error")

			// Other files written over and over: the log, notes, an
			// editor's swap and backup files, and (watching one file) a
			// second YAML file.
			others := []string{"floodgate.log", "notes.txt", ".rules.yaml.swp", "rules.yaml~"}
			if mode == "file" {
				others = append(others, "other.yaml")
			}
			for i := range 10 {
				for _, name := range others {
					appendFile(t, filepath.Join(dir, name), "line")
				}
				if i%3 == 0 {
					writeAtomic(t, filepath.Join(dir, "notes.txt"), "rewritten")
				}
				time.Sleep(30 * time.Millisecond)
			}
			ev.quiet(t, 4*filewatch.DebounceMax, "after writing other files")

			// The config itself still reloads.
			writeAtomic(t, filepath.Join(dir, "rules.yaml"), rules(5))
			if got := requestsOf(t, ev.load(t)); got != 5 {
				t.Fatalf("requests = %d, want 5", got)
			}
		})
	}
}

// TestWatchSymlinkedFile: a config file that is a symlink to a file in
// another folder reloads when that file is edited, in place or by a
// rename, and follows the link when it is pointed elsewhere.
func TestWatchSymlinkedFile(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"folder", "file"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			dir, elsewhere, third := t.TempDir(), t.TempDir(), t.TempDir()
			real := filepath.Join(elsewhere, "real.yaml")
			writeFiles(t, elsewhere, map[string]string{"real.yaml": rules(1)})
			link := filepath.Join(dir, "rules.yaml")
			if err := os.Symlink(real, link); err != nil {
				t.Fatal(err)
			}
			target := dir
			if mode == "file" {
				target = link
			}
			ev := newEvents()
			w, err := watch(t.Context(), target, ev.onLoad, ev.onError)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			<-ev.loads

			if err := os.WriteFile(real, []byte(rules(2)), 0o644); err != nil {
				t.Fatal(err)
			}
			if got := requestsOf(t, ev.load(t)); got != 2 {
				t.Fatalf("after an edit in place: requests = %d, want 2", got)
			}
			writeAtomic(t, real, rules(3))
			if got := requestsOf(t, ev.load(t)); got != 3 {
				t.Fatalf("after a rename over the target: requests = %d, want 3", got)
			}
			// Other files beside the target do not reload.
			appendFile(t, filepath.Join(elsewhere, "unrelated.yaml"), "x: 1")
			ev.quiet(t, 4*filewatch.DebounceMax, "after writing beside the target")

			// The link pointed at a file in a third folder (ln -sfn).
			other := filepath.Join(third, "other.yaml")
			writeFiles(t, third, map[string]string{"other.yaml": rules(4)})
			tmp := link + ".tmp"
			if err := os.Symlink(other, tmp); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(tmp, link); err != nil {
				t.Fatal(err)
			}
			if got := requestsOf(t, ev.load(t)); got != 4 {
				t.Fatalf("after re-pointing the link: requests = %d, want 4", got)
			}
			if err := os.WriteFile(other, []byte(rules(6)), 0o644); err != nil {
				t.Fatal(err)
			}
			if got := requestsOf(t, ev.load(t)); got != 6 {
				t.Fatalf("after editing the new target: requests = %d, want 6", got)
			}
			// The old target no longer counts.
			if err := os.WriteFile(real, []byte(rules(7)), 0o644); err != nil {
				t.Fatal(err)
			}
			ev.quiet(t, 4*filewatch.DebounceMax, "after editing the old target")
		})
	}
}
