// Package paramcount finds the functions that take more positional
// parameters than a bound, for the test that keeps the decision path's
// functions (algorithms/, store/, server/) at four or fewer: a longer
// list is a small struct waiting to be named (see its test).
package paramcount

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
)

// Func is a function or method declared with more parameters than the
// bound.
type Func struct {
	// Name is the package's directory relative to the root, then the
	// function's name, with its receiver's type for a method:
	// "store/redisstore.Store.refund".
	Name string
	// Pos is the declaration's file (relative to the root) and line.
	Pos string
	// Params is the number of parameters, the receiver not counted.
	Params int
}

// Over returns the functions and methods declared in the Go files under
// the directories dirs of root (and their subdirectories) that take more
// than limit parameters, sorted by name. Test files and generated files
// (a "Code generated ... DO NOT EDIT." line) are skipped; function
// literals are not counted.
func Over(root string, dirs []string, limit int) ([]Func, error) {
	var out []Func
	fset := token.NewFileSet()
	for _, dir := range dirs {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			if ast.IsGenerated(f) {
				return nil
			}
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			pkg := filepath.ToSlash(filepath.Dir(rel))
			for _, decl := range f.Decls {
				fd, ok := decl.(*ast.FuncDecl)
				if !ok {
					continue
				}
				if n := count(fd.Type.Params); n > limit {
					out = append(out, Func{Name: pkg + "." + name(fd), Pos: fmt.Sprintf("%s:%d", filepath.ToSlash(rel), fset.Position(fd.Pos()).Line), Params: n})
				}
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("paramcount: %w", err)
		}
	}
	slices.SortFunc(out, func(a, b Func) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// count is the number of parameters in l: a, b int counts two.
func count(l *ast.FieldList) int {
	n := 0
	for _, f := range l.List {
		n += max(1, len(f.Names))
	}
	return n
}

// name is fd's name, after its receiver's type for a method.
func name(fd *ast.FuncDecl) string {
	if fd.Recv == nil {
		return fd.Name.Name
	}
	t := fd.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	switch x := t.(type) {
	case *ast.IndexExpr: // a generic type's method
		t = x.X
	case *ast.IndexListExpr:
		t = x.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name + "." + fd.Name.Name
	}
	return fd.Name.Name
}
