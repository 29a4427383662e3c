package testkit

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// externalFiles are files of other projects that comments name on
// purpose, with whose they are.
var externalFiles = map[string]string{
	"ratelimit.go":    "envoyproxy/ratelimit's src/service",
	"base_limiter.go": "envoyproxy/ratelimit's src/limiter",
}

// pending are stale names in comments of the Redis store's Lua scripts,
// which are being rewritten; the test logs those already gone, to be taken
// off this list.
var pending = map[string]bool{}

// notGo are camel-case words comments use that are not Go names of ours:
// spellings of names, and names of other projects.
var notGo = map[string]bool{
	"gRPC": true, "xDS": true, "macOS": true, "camelCase": true, "lowerCamel": true,
	"hitsAddend":    true, // Envoy's RateLimitRequest in JSON
	"waitForReady":  true, // gRPC's service config in JSON
	"xNN":           true, // an escape's notation
	"OpenTelemetry": true, "JavaScript": true,
	"AbandonActions":   true, // RLQS' abandon_action
	"DescriptorStatus": true, // Envoy's RateLimitResponse.DescriptorStatus
	"RecursionLimit":   true, // protobuf-go's proto.UnmarshalOptions
}

// product reports whether the file at rel (from the module's root) is
// non-test Go of the product module (not e2e/, bench/ or deploy/).
func product(rel string) bool {
	if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
		return false
	}
	for _, dir := range []string{"e2e/", "bench/", "deploy/"} {
		if strings.HasPrefix(rel, dir) {
			return false
		}
	}
	return true
}

var (
	fileRef = regexp.MustCompile(`\b([A-Za-z0-9][A-Za-z0-9_]*\.(?:go|lua))\b`)
	nameRef = regexp.MustCompile(`\b([a-z][a-z0-9]*)\.([A-Z][A-Za-z0-9_]*)(?:\.([A-Z][A-Za-z0-9_]*))?\b`)
	// camelRef is a camel-case word (lowerCamel, or UpperCamel with a
	// second capital) not part of a selector, path or file name: in a Go
	// comment, one of the module's Go names.
	// memberRef is Type.Member, unqualified: a type of the comment's own
	// package and one of its fields or methods.
	memberRef = regexp.MustCompile(`(?:^|[^\w.])([A-Z][A-Za-z0-9]*)\.([A-Za-z][A-Za-z0-9_]*)\b`)
	camelRef  = regexp.MustCompile(`(?:^|[^\w./-])([a-z][a-z0-9]*[A-Z][A-Za-z0-9]*|[A-Z][a-z0-9]+[A-Z][a-z][A-Za-z0-9]*)(?:$|[^\w.]|\.(?:\s|$))`)
)

// TestCommentsNameWhatExists: every Go or Lua file name that a comment of
// the module's Go or Lua names is a file of the repository, every
// pkg.Name (or pkg.Type.Method) whose pkg is one of the module's packages
// is declared in that package, and every camel-case name a Go comment
// uses (outside the code blocks of doc comments) is a name somewhere in
// the module's Go, so that a rename or a removal cannot leave comments
// pointing at nothing. An unqualified Type.Member whose Type is a type of
// the comment's own package names one of its fields or methods.
func TestCommentsNameWhatExists(t *testing.T) {
	root := "../.."
	files := map[string]bool{}
	decls := map[string]map[string]bool{} // package name -> its top-level names and Type.Method
	idents := map[string]bool{}           // every identifier of the module's Go
	pkgOf := map[string]string{}          // Go file -> its package's name
	var sources []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() {
			return nil
		}
		files[d.Name()] = true
		rel, _ := filepath.Rel(root, path)
		if strings.HasPrefix(rel, "gen/") || !(strings.HasSuffix(path, ".go") || strings.HasSuffix(path, ".lua")) {
			return nil
		}
		sources = append(sources, path)
		if strings.HasSuffix(path, ".go") {
			pkgOf[path] = declare(t, path, decls, idents)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	delete(decls, "main")
	seen := map[string]bool{}
	stale := func(path string, line int, name string) {
		rel, _ := filepath.Rel(root, path)
		if pending[rel+" "+name] {
			seen[rel+" "+name] = true
			return
		}
		t.Errorf("%s:%d: a comment names %s, which does not exist", rel, line, name)
	}
	for _, path := range sources {
		for _, c := range comments(t, path) {
			for _, m := range fileRef.FindAllStringSubmatch(c.text, -1) {
				if !files[m[1]] && externalFiles[m[1]] == "" {
					stale(path, c.line, m[1])
				}
			}
			if rel, _ := filepath.Rel(root, path); product(rel) && !strings.HasPrefix(c.text, "//\t") {
				for _, m := range camelRef.FindAllStringSubmatch(c.text, -1) {
					if w := m[1]; !idents[w] && !idents[strings.TrimSuffix(w, "s")] && !notGo[w] {
						stale(path, c.line, w)
					}
				}
			}
			if strings.HasSuffix(path, ".go") {
				names := decls[pkgOf[path]]
				for _, m := range memberRef.FindAllStringSubmatch(c.text, -1) {
					if names["type "+m[1]] && !names["embeds "+m[1]] && !names[m[1]+"."+m[2]] {
						stale(path, c.line, m[1]+"."+m[2])
					}
				}
			}
			for _, m := range nameRef.FindAllStringSubmatch(c.text, -1) {
				names, ours := decls[m[1]]
				switch {
				case !ours:
				case !names[m[2]]:
					stale(path, c.line, m[1]+"."+m[2])
				case m[3] != "" && names["type "+m[2]] && !names["embeds "+m[2]] && !names[m[2]+"."+m[3]]:
					stale(path, c.line, m[1]+"."+m[2]+"."+m[3])
				}
			}
		}
	}
	for p := range pending {
		if !seen[p] {
			t.Logf("%s: fixed; take it off the pending list", p)
		}
	}
}

// declare records path's package's top-level declarations in decls, and
// every identifier of the file in idents; it returns the package's name.
func declare(t *testing.T, path string, decls map[string]map[string]bool, idents map[string]bool) string {
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	ast.Inspect(f, func(n ast.Node) bool {
		if id, ok := n.(*ast.Ident); ok {
			idents[id.Name] = true
		}
		return true
	})
	pkg := strings.TrimSuffix(f.Name.Name, "_test")
	names := decls[pkg]
	if names == nil {
		names = map[string]bool{}
		decls[pkg] = names
	}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil || len(d.Recv.List) == 0 {
				names[d.Name.Name] = true
				continue
			}
			typ := d.Recv.List[0].Type
			for {
				switch x := typ.(type) {
				case *ast.StarExpr:
					typ = x.X
					continue
				case *ast.IndexExpr:
					typ = x.X
					continue
				case *ast.IndexListExpr:
					typ = x.X
					continue
				}
				break
			}
			if id, ok := typ.(*ast.Ident); ok {
				names[id.Name+"."+d.Name.Name] = true
			}
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					names[s.Name.Name] = true
					names["type "+s.Name.Name] = true
					if st, ok := s.Type.(*ast.StructType); ok {
						for _, fl := range st.Fields.List {
							for _, n := range fl.Names {
								names[s.Name.Name+"."+n.Name] = true
							}
							if len(fl.Names) == 0 { // embedded: its methods are promoted
								names["embeds "+s.Name.Name] = true
							}
						}
					} else if _, ok := s.Type.(*ast.InterfaceType); ok {
						for _, m := range s.Type.(*ast.InterfaceType).Methods.List {
							for _, n := range m.Names {
								names[s.Name.Name+"."+n.Name] = true
							}
						}
					} else {
						names["embeds "+s.Name.Name] = true // a defined type may take its base's methods
					}
				case *ast.ValueSpec:
					for _, n := range s.Names {
						names[n.Name] = true
					}
				}
			}
		}
	}
	return pkg
}

// comment is one comment line of a source file.
type comment struct {
	line int
	text string
}

// comments are the comment lines of a Go (//) or Lua (--) file.
func comments(t *testing.T, path string) []comment {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	mark := "//"
	if strings.HasSuffix(path, ".lua") {
		mark = "--"
	}
	var out []comment
	for i, l := range strings.Split(string(b), "\n") {
		if j := strings.Index(l, mark); j >= 0 && !strings.Contains(l[:j], `"`) && !strings.Contains(l[:j], "`") {
			out = append(out, comment{i + 1, l[j:]})
		}
	}
	return out
}
