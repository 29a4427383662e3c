package deploy_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// dockerignore is a .dockerignore file: Docker excludes a path when a
// pattern matches it or one of its parent folders.
type dockerignore []string

func readDockerignore(t *testing.T) dockerignore {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	var pats dockerignore
	for _, l := range strings.Split(string(data), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		// This matcher knows plain filepath.Match patterns only; a
		// pattern beyond them must be taught to it, not misread.
		if strings.HasPrefix(l, "!") || strings.Contains(l, "**") {
			t.Fatalf(".dockerignore: %q: exceptions and ** are not understood by this test's matcher", l)
		}
		p := filepath.Clean(strings.TrimPrefix(l, "/"))
		if _, err := filepath.Match(p, ""); err != nil {
			t.Fatalf(".dockerignore: %q: %v", l, err)
		}
		pats = append(pats, p)
	}
	return pats
}

// excluded reports whether rel (slash-separated, relative to the context)
// is left out of the build context.
func (d dockerignore) excluded(rel string) bool {
	for p := rel; p != "." && p != "/" && p != ""; p = filepath.Dir(p) {
		for _, pat := range d {
			if ok, _ := filepath.Match(pat, p); ok {
				return true
			}
		}
	}
	return false
}

// copyContext copies the files of the build context that .dockerignore
// leaves into dst.
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
		if ignore.excluded(filepath.ToSlash(rel)) {
			if d.IsDir() {
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
		return os.WriteFile(target, data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}
