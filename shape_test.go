package paddock_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// The house's shape (issue #31): no type has more than maxMethods methods
// and no function more than maxLines lines, in the module's own code
// (tests and generated code aside), so that each concern stays a room of
// its own and each function a step with a name.
const (
	maxMethods = 40
	maxLines   = 120
)

// wideTypes may have more methods, each for the reason given.
var wideTypes = map[string]string{
	// The Go client speaks paddock's whole protocol (paddock.Service, 46
	// methods), as the issue allows; it is a list of calls, each a few
	// lines over one transport.
	"client.Client": "implements paddock.Service",
}

var generated = regexp.MustCompile(`(?m)^// Code generated .* DO NOT EDIT\.$`)

func TestNoTypeOrFunctionOutgrowsItsRoom(t *testing.T) {
	fset := token.NewFileSet()
	methods := map[string]int{}
	var long []string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != "." && (strings.HasPrefix(n, ".") || n == "testdata" || n == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		for _, g := range f.Comments {
			for _, c := range g.List {
				if c.Pos() < f.Package && generated.MatchString(c.Text) {
					return nil // generated: its shape is its generator's
				}
			}
		}
		pkg := filepath.ToSlash(filepath.Dir(path))
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok {
				continue
			}
			if fd.Recv != nil {
				if name := recvName(fd.Recv.List[0].Type); name != "" {
					methods[filepath.Base(pkg)+"."+name]++
				}
			}
			if n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1; n > maxLines {
				long = append(long, fset.Position(fd.Pos()).String()+" "+fd.Name.Name)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var wide []string
	for typ, n := range methods {
		if _, ok := wideTypes[typ]; !ok && n > maxMethods {
			wide = append(wide, typ)
		}
	}
	sort.Strings(wide)
	for _, typ := range wide {
		t.Errorf("%s has %d methods; at most %d: split it by concern", typ, methods[typ], maxMethods)
	}
	for _, l := range long {
		t.Errorf("%s is over %d lines: split it where a name explains each part", l, maxLines)
	}
	for typ := range wideTypes {
		if methods[typ] <= maxMethods {
			t.Errorf("%s has %d methods now: take it off wideTypes", typ, methods[typ])
		}
	}
}

func recvName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return recvName(e.X)
	case *ast.IndexExpr:
		return recvName(e.X)
	case *ast.IndexListExpr:
		return recvName(e.X)
	case *ast.Ident:
		return e.Name
	}
	return ""
}
