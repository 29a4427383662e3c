package deploy_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"
)

// dockerignore is the build context's .dockerignore, read and matched by
// moby/patternmatcher, the code Docker and BuildKit use: a path is left
// out when the last pattern that matches it or one of its parent folders
// is not a !exception.
type dockerignore struct {
	*patternmatcher.PatternMatcher
}

func readDockerignore(t *testing.T) dockerignore {
	t.Helper()
	f, err := os.Open(filepath.Join(repoRoot, ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	patterns, err := ignorefile.ReadAll(f)
	if err != nil {
		t.Fatalf(".dockerignore: %v", err)
	}
	pm, err := patternmatcher.New(patterns)
	if err != nil {
		t.Fatalf(".dockerignore: %v", err)
	}
	return dockerignore{pm}
}

// excluded reports whether rel (slash-separated, relative to the context)
// is left out of the build context.
func (d dockerignore) excluded(t *testing.T, rel string) bool {
	t.Helper()
	out, err := d.MatchesOrParentMatches(rel)
	if err != nil {
		t.Fatalf(".dockerignore: matching %s: %v", rel, err)
	}
	return out
}

// copyContext copies the files of the build context that .dockerignore
// leaves into dst. An excluded folder is skipped whole unless a !exception
// could bring back something inside it.
func copyContext(t *testing.T, ignore dockerignore, dst string) {
	t.Helper()
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	err := filepath.WalkDir(repoRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(repoRoot, p)
		if err != nil {
			return err
		}
		if rel == "." {
			return nil
		}
		if ignore.excluded(t, filepath.ToSlash(rel)) {
			if d.IsDir() && !ignore.Exclusions() {
				return filepath.SkipDir
			}
			return nil
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}
