package lifecycle_test

import (
	"go/ast"
	"go/token"
	"go/types"
	"strings"
	"testing"

	"golang.org/x/tools/go/packages"
)

// durableWrites are lifecycle's own calls that write the store or a
// durable file, beside every method of paddock.Store and paddock.Tx.
var durableWrites = map[string]bool{
	"update": true, "record": true, "recordEvents": true, "recordEventsSeq": true,
	"saveSubmission": true, "saveFlow": true, "saveQueue": true, "saveTask": true,
}

// No durable write in package lifecycle drops its error, and none runs
// under a context a client can cancel once the write around it was
// detached from cancellation: the statements inside an update called with
// context.WithoutCancel(ctx) must not take the request's ctx.
func TestDurableWritesKeepTheirErrors(t *testing.T) {
	if testing.Short() {
		t.Skip("loads the package's syntax and types")
	}
	pkgs, err := packages.Load(&packages.Config{Mode: packages.NeedName | packages.NeedSyntax | packages.NeedTypes | packages.NeedTypesInfo}, ".")
	if err != nil {
		t.Fatal(err)
	}
	if packages.PrintErrors(pkgs) > 0 || len(pkgs) != 1 {
		t.Fatal("cannot load package lifecycle")
	}
	p := pkgs[0]
	isStore := func(t types.Type) bool {
		if pt, ok := t.(*types.Pointer); ok {
			t = pt.Elem()
		}
		n, ok := t.(*types.Named)
		return ok && n.Obj().Pkg() != nil && n.Obj().Pkg().Path() == "github.com/paddock-dev/paddock" &&
			(n.Obj().Name() == "Store" || n.Obj().Name() == "Tx")
	}
	// durable reports whether call is a durable write returning an error.
	durable := func(call *ast.CallExpr) (string, bool) {
		se, ok := call.Fun.(*ast.SelectorExpr)
		if !ok {
			return "", false
		}
		sel := p.TypesInfo.Selections[se]
		if sel == nil || sel.Kind() != types.MethodVal {
			return "", false
		}
		sig := sel.Type().(*types.Signature)
		res := sig.Results()
		if res.Len() == 0 || res.At(res.Len()-1).Type().String() != "error" {
			return "", false
		}
		if isStore(sel.Recv()) || sel.Obj().Pkg() == p.Types && durableWrites[se.Sel.Name] {
			return se.Sel.Name, true
		}
		return "", false
	}
	var bad []string
	report := func(n ast.Node, why string) {
		bad = append(bad, p.Fset.Position(n.Pos()).String()+": "+why)
	}
	for _, f := range p.Syntax {
		if strings.HasSuffix(p.Fset.Position(f.Pos()).Filename, "_test.go") {
			continue
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.ExprStmt:
				if call, ok := n.X.(*ast.CallExpr); ok {
					if name, ok := durable(call); ok {
						report(n, name+"'s error is dropped")
					}
				}
			case *ast.DeferStmt:
				if name, ok := durable(n.Call); ok {
					report(n, "deferred "+name+"'s error is dropped")
				}
			case *ast.GoStmt:
				if name, ok := durable(n.Call); ok {
					report(n, name+" in a goroutine drops its error")
				}
			case *ast.AssignStmt:
				if len(n.Rhs) == 1 {
					if call, ok := n.Rhs[0].(*ast.CallExpr); ok {
						if name, ok := durable(call); ok {
							if id, ok := n.Lhs[len(n.Lhs)-1].(*ast.Ident); ok && id.Name == "_" {
								report(n, name+"'s error is assigned to _")
							}
						}
					}
				}
			case *ast.CallExpr:
				checkDetached(p, n, durable, report)
			}
			return true
		})
	}
	for _, b := range bad {
		t.Error(b)
	}
}

func isContext(t types.Type) bool { return t.String() == "context.Context" }

// checkDetached finds an update called with context.WithoutCancel(...) as
// its context whose function hands a context other than its own to the
// store.
func checkDetached(p *packages.Package, call *ast.CallExpr, durable func(*ast.CallExpr) (string, bool), report func(ast.Node, string)) {
	name, ok := durable(call)
	if !ok || name != "update" && name != "Update" || len(call.Args) != 2 {
		return
	}
	inner, ok := call.Args[1].(*ast.FuncLit)
	if !ok {
		return
	}
	// The context the update runs under: an identifier (whose object the
	// statements must take too), or context.WithoutCancel(...) itself
	// (then no outer identifier may be taken: it is the caller's).
	var outerObj types.Object
	switch a := call.Args[0].(type) {
	case *ast.Ident:
		outerObj = p.TypesInfo.Uses[a]
	case *ast.CallExpr:
		if se, ok := a.Fun.(*ast.SelectorExpr); !ok || se.Sel.Name != "WithoutCancel" {
			return
		}
	default:
		return
	}
	ast.Inspect(inner.Body, func(n ast.Node) bool {
		c, ok := n.(*ast.CallExpr)
		if !ok || len(c.Args) == 0 {
			return true
		}
		if _, ok := durable(c); !ok {
			return true
		}
		if id, ok := c.Args[0].(*ast.Ident); ok {
			obj := p.TypesInfo.Uses[id]
			if obj == nil || obj == outerObj || obj.Pos() == token.NoPos || obj.Pos() >= inner.Pos() || !isContext(obj.Type()) {
				return true
			}
			if outerObj == nil {
				report(c, "the write is detached from cancellation but "+id.Name+" is the caller's context")
			} else {
				report(c, "the update runs under "+outerObj.Name()+" but this statement under "+id.Name)
			}
		}
		return true
	})
}
