package testkit

import (
	"bufio"
	"bytes"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// layoutPending are internal packages known to be imported only by tests
// while they are reworked; the test logs them and fails
// once one is in use or gone, to be taken off this list.
var layoutPending = map[string]bool{}

// listed is what the layout rule reads of one package of the module.
type listed struct {
	path    string   // import path without the module's prefix
	main    bool     // a command (package main)
	imports []string // of its non-test files, module packages only
	byTests []string // of its _test.go files, module packages only
}

// testSupport reports whether the package at path (without the module's
// prefix) is test support, by its place: under internal/testkit/, under
// e2e/, or named like the standard library's httptest (its last element
// ends in "test"). scripts/lines.sh counts by the same rule.
func testSupport(path string) bool {
	switch {
	case path == "internal/testkit", strings.HasPrefix(path, "internal/testkit/"):
		return true
	case path == "e2e", strings.HasPrefix(path, "e2e/"):
		return true
	}
	return strings.HasSuffix(path, "test")
}

// layoutProblems applies the layout rule to the module's packages: an
// internal product package is imported by some non-test file of a product
// package or command (else only tests need it, and it belongs in test
// support or nowhere), and no product package's non-test files import test
// support.
func layoutProblems(pkgs []listed) []string {
	importedBy := map[string][]string{} // package -> product packages whose non-test files import it
	for _, p := range pkgs {
		if testSupport(p.path) {
			continue
		}
		for _, imp := range p.imports {
			importedBy[imp] = append(importedBy[imp], p.path)
		}
	}
	testedBy := map[string][]string{} // package -> packages whose tests import it
	for _, p := range pkgs {
		for _, imp := range p.byTests {
			testedBy[imp] = append(testedBy[imp], p.path)
		}
		if !testSupport(p.path) {
			for _, imp := range p.imports {
				if testSupport(imp) {
					testedBy[imp] = append(testedBy[imp], p.path) // keeps the importer in the message
				}
			}
		}
	}
	var problems []string
	for _, p := range pkgs {
		if testSupport(p.path) || p.main {
			continue
		}
		for _, imp := range p.imports {
			if testSupport(imp) {
				problems = append(problems, p.path+": a product package imports test support "+imp)
			}
		}
		internal := p.path == "internal" || strings.HasPrefix(p.path, "internal/") || strings.Contains(p.path, "/internal/")
		if internal && len(importedBy[p.path]) == 0 {
			if len(testedBy[p.path]) > 0 {
				problems = append(problems, p.path+": imported only by tests ("+strings.Join(testedBy[p.path], ", ")+"); move it under internal/testkit/ or next to its tests")
			} else {
				problems = append(problems, p.path+": imported by nothing")
			}
		}
	}
	slices.Sort(problems)
	return problems
}

func TestLayoutProblems(t *testing.T) {
	tests := []struct {
		name string
		pkgs []listed
		want []string
	}{
		{"a product package in use", []listed{
			{path: "cmd/app", main: true, imports: []string{"internal/a"}},
			{path: "internal/a", byTests: []string{"internal/testkit"}},
			{path: "internal/testkit"},
		}, nil},
		{"an internal package only tests import", []listed{
			{path: "cmd/app", main: true, imports: []string{"internal/a"}},
			{path: "internal/a", byTests: []string{"internal/b"}},
			{path: "internal/b"},
		}, []string{"internal/b: imported only by tests (internal/a); move it under internal/testkit/ or next to its tests"}},
		{"imported only by test support", []listed{
			{path: "cmd/app", main: true},
			{path: "internal/testkit", imports: []string{"internal/b"}},
			{path: "internal/b"},
		}, []string{"internal/b: imported by nothing"}},
		{"imported by nothing", []listed{
			{path: "internal/unused"},
		}, []string{"internal/unused: imported by nothing"}},
		{"a public package is an entry point", []listed{
			{path: "client/limit"},
		}, nil},
		{"product code imports test support", []listed{
			{path: "cmd/app", main: true, imports: []string{"server"}},
			{path: "server", imports: []string{"store/storetest"}},
			{path: "store/storetest"},
		}, []string{"server: a product package imports test support store/storetest"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := layoutProblems(tt.pkgs); !slices.Equal(got, tt.want) {
				t.Errorf("layoutProblems = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestNoProductPackageOnlyByTests applies the layout rule to the module as
// `go list` sees it.
func TestNoProductPackageOnlyByTests(t *testing.T) {
	mod, err := exec.Command("go", "list", "-m").Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	prefix := strings.TrimSpace(string(mod)) + "/"
	const format = `{{.ImportPath}}	{{.Name}}	{{join .Imports " "}}	{{join .TestImports " "}} {{join .XTestImports " "}}`
	cmd := exec.Command("go", "list", "-f", format, prefix+"...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	ours := func(paths string) []string {
		var in []string
		for p := range strings.FieldsSeq(paths) {
			if rel, ok := strings.CutPrefix(p, prefix); ok {
				in = append(in, rel)
			}
		}
		return in
	}
	var pkgs []listed
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Split(sc.Text(), "\t")
		if len(f) != 4 {
			t.Fatalf("go list line %q: want 4 fields", sc.Text())
		}
		pkgs = append(pkgs, listed{
			path:    strings.TrimPrefix(f[0], prefix),
			main:    f[1] == "main",
			imports: ours(f[2]),
			byTests: ours(f[3]),
		})
	}
	if len(pkgs) < 10 {
		t.Fatalf("go list found %d packages of the module; want the whole module", len(pkgs))
	}
	pending := map[string]bool{}
	for _, p := range layoutProblems(pkgs) {
		if path, _, _ := strings.Cut(p, ":"); layoutPending[path] {
			pending[path] = true
			t.Logf("pending: %s", p)
			continue
		}
		t.Error(p)
	}
	for path := range layoutPending {
		if !pending[path] {
			t.Errorf("%s is on layoutPending but passes the layout rule: take it off the list", path)
		}
	}
}
