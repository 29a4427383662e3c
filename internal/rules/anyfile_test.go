package rules

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestAnyFile: with AnyFile a folder is read as the reference reads its
// runtime folder: files in sub-folders and files of any extension are
// loaded, names starting with '.' are not, and an empty folder is a
// config with no rules; without it, only the folder's *.yaml and *.yml,
// and an empty folder is an error.
func TestAnyFile(t *testing.T) {
	rule := func(domain string) string {
		return "domain: " + domain + "\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n"
	}
	dir := t.TempDir()
	for name, text := range map[string]string{
		"a.yaml":           rule("a"),
		"sub/b.yaml":       rule("b"),
		"sub/deeper/c.yml": rule("c"),
		"rules":            rule("d"),
		".hidden.yaml":     "not: [yaml",
		".git/config":      "not: [yaml",
		"sub/.swp":         "not: [yaml",
	} {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	link := filepath.Join(t.TempDir(), "current")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{dir, link} {
		c, err := Load(path, Options{AnyFile: true})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := c.Domains(), []string{"a", "b", "c", "d"}; !slices.Equal(got, want) {
			t.Errorf("AnyFile %s: domains %q, want %q", path, got, want)
		}
	}
	c, err := Load(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.Domains(), []string{"a"}; !slices.Equal(got, want) {
		t.Errorf("without AnyFile: domains %q, want %q", got, want)
	}
	if _, got, _ := walkDir(dir); !slices.Equal(got, []string{filepath.Join(dir, "sub"), filepath.Join(dir, "sub", "deeper")}) {
		t.Errorf("walkDir's folders: %q, want sub and sub/deeper", got)
	}

	empty := t.TempDir()
	c, err = Load(empty, Options{AnyFile: true})
	if err != nil || !c.Empty() || len(c.Files()) != 0 {
		t.Errorf("AnyFile, an empty folder: %v, %v; want an empty config", c, err)
	}
	if _, err := Load(empty, Options{}); !errors.Is(err, ErrInvalid) {
		t.Errorf("without AnyFile, an empty folder: %v, want ErrInvalid", err)
	}
}
