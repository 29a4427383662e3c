package main

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/floodgate/floodgate/internal/rules"
)

// examplePolicy finds the policies user-facing text names: the Go
// client's Policy("free"), the CLI's --policy login, JSON's "policy": "pro".
var examplePolicy = regexp.MustCompile(`Policy\("([a-z_]+)"\)|--policy ([a-z_]+)|"policy": ?"([a-z_]+)"`)

// TestExamplesHoldEveryPolicy: every policy the README, the docs and the
// client's non-test examples name is defined in examples/rules, the rules
// make run serves, so each example runs as written against it.
func TestExamplesHoldEveryPolicy(t *testing.T) {
	root := filepath.Join("..", "..")
	cfg, err := rules.Load(filepath.Join(root, "examples", "rules"), rules.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defined := map[string]bool{}
	for _, p := range cfg.Policies() {
		defined[p.Name] = true
	}
	var files []string
	for _, pattern := range []string{"README.md", "docs/*.md", "client/*.go", "client/*/*.go", "examples/*/*.md"} {
		m, err := filepath.Glob(filepath.Join(root, pattern))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	seen := 0
	for _, f := range files {
		if regexp.MustCompile(`_test\.go$`).MatchString(f) {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range examplePolicy.FindAllStringSubmatch(string(b), -1) {
			name := m[1] + m[2] + m[3]
			seen++
			if !defined[name] {
				t.Errorf("%s names policy %q, which examples/rules does not define", f, name)
			}
		}
	}
	if seen < 3 {
		t.Fatalf("found %d policy names in the docs; the pattern no longer matches how they are written", seen)
	}
}
