package testkit

import (
	"cmp"
	"io/fs"
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
	// testName is a Go test's name.
	testName = regexp.MustCompile(`\bTest[A-Z]\w*`)
	// goRef is pkg.Name or pkg.Type.Member, pkg perhaps after its path.
	goRef = regexp.MustCompile(`^(?:[\w/]+/)?([a-z][a-z0-9]*)\.([A-Z]\w*)(?:\.(\w+))?$`)
)

// TestDocsNameWhatExists: every path of the repository that the docs
// write as code (`internal/keys`, `store/redisstore/lua/demand.lua`, a
// package's `internal/keys.Check`) and every relative link of theirs
// leads to a file or folder that exists, and every Go name they write as
// code with one of the module's packages (`rules.Load`, `keys.Check`,
// `server.Envoy.ShouldRateLimit`) is declared in it, and every test they
// name (TestDocShellBlocks) is one, so that a move, a rename or a removal
// cannot leave the docs pointing at nothing. (The CHANGELOG tells of what
// was, and is not checked.)
func TestDocsNameWhatExists(t *testing.T) {
	root := "../.."
	decls := map[string]map[string]bool{} // as TestCommentsNameWhatExists'
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules" || d.Name() == "testdata" || d.Name() == "gen") {
			return cmp.Or(err, filepath.SkipDir)
		}
		if strings.HasSuffix(path, ".go") {
			declare(t, path, decls, map[string]bool{})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]bool{}
	for _, names := range decls {
		for n := range names {
			tests[n] = strings.HasPrefix(n, "Test")
		}
	}
	delete(decls, "main")
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
		for _, name := range testName.FindAllString(string(b), -1) {
			if !tests[name] {
				t.Errorf("%s: names %s, which is no test", doc, name)
			}
		}
		for _, m := range codeSpan.FindAllStringSubmatch(text, -1) {
			r := goRef.FindStringSubmatch(m[1])
			if r == nil || decls[r[1]] == nil {
				continue // not a Go name, or not of one of the module's packages
			}
			names := decls[r[1]]
			if !names[r[2]] || r[3] != "" && names["type "+r[2]] && !names["embeds "+r[2]] && !names[r[2]+"."+r[3]] {
				t.Errorf("%s: `%s` names a Go name that does not exist", doc, m[1])
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
