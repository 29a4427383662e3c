package testkit

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// otherProjects are paths the docs name in other projects' trees.
var otherProjects = map[string]string{
	"examples/ratelimit/config": "envoyproxy/ratelimit's example config folder",
}

var (
	fence    = regexp.MustCompile("(?s)```.*?```")
	codeSpan = regexp.MustCompile("`([A-Za-z0-9_./-]+)`")
	linkTo   = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	// goName is the .Name (or .Type.Method) after a package's path.
	goName = regexp.MustCompile(`\.[A-Z]\w*(\.\w+)?$`)
)

// TestDocsNameWhatExists: every path of the repository that the docs
// write as code (`internal/keys`, `store/redisstore/lua/demand.lua`, a
// package's `internal/keys.Check`) and every relative link of theirs
// leads to a file or folder that exists, so that a move or a removal
// cannot leave the docs pointing at nothing. (The CHANGELOG tells of what
// was, and is not checked.)
func TestDocsNameWhatExists(t *testing.T) {
	root := "../.."
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	tops := map[string]bool{}
	for _, e := range entries {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			tops[e.Name()] = true
		}
	}
	docs := []string{"README.md", "deploy/README.md"}
	for _, pattern := range []string{"docs/*.md", "examples/*/*.md", "bench/*.md"} {
		m, err := filepath.Glob(filepath.Join(root, pattern))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range m {
			rel, _ := filepath.Rel(root, p)
			docs = append(docs, rel)
		}
	}
	if len(docs) < 10 {
		t.Fatalf("found %d docs; want the README and docs/", len(docs))
	}
	exists := func(rel string) bool {
		_, err := os.Stat(filepath.Join(root, rel))
		return err == nil
	}
	for _, doc := range docs {
		b, err := os.ReadFile(filepath.Join(root, doc))
		if err != nil {
			t.Fatal(err)
		}
		text := fence.ReplaceAllString(string(b), "")
		for _, m := range codeSpan.FindAllStringSubmatch(text, -1) {
			span := m[1]
			top, _, nested := strings.Cut(span, "/")
			if !nested || !tops[top] || strings.HasSuffix(span, "/...") || otherProjects[span] != "" {
				continue
			}
			if p := strings.TrimSuffix(goName.ReplaceAllString(span, ""), "/"); !exists(p) {
				t.Errorf("%s: `%s` names %s, which does not exist", doc, span, p)
			}
		}
		for _, m := range linkTo.FindAllStringSubmatch(text, -1) {
			target, _, _ := strings.Cut(m[1], "#")
			if target == "" || strings.Contains(target, ":") {
				continue // an anchor of the page, or a URL
			}
			if p := filepath.Join(filepath.Dir(doc), target); !exists(p) {
				t.Errorf("%s: a link to %s, which does not exist", doc, target)
			}
		}
	}
}
