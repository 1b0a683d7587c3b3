package lifecycle_test

import (
	"go/ast"
	"go/types"
	"strings"
	"testing"

	"golang.org/x/tools/go/packages"
)

// reachers are the functions that reach a tool (a working tool's code, a
// command in the sandbox), each with the only places allowed to use it:
// another reacher, the doctor's probes (which run /bin/true in a scratch
// directory, on no run), or "run": the run of a brokered call, a function
// literal given as the run field of a lifecycle.brokered value. Whatever
// else uses one of them reaches a tool around the broker.
var reachers = map[string][]string{
	"(*github.com/paddock-dev/paddock/tools.Tool).Call":               {"(*github.com/paddock-dev/paddock/lifecycle.Broker).callTool"},
	"(*github.com/paddock-dev/paddock/lifecycle.Broker).callTool":     {"run"},
	"(*github.com/paddock-dev/paddock/lifecycle.executor).execStream": {"run", "(*github.com/paddock-dev/paddock/lifecycle.Verifier).runChecks"},
	"(*github.com/paddock-dev/paddock/lifecycle.Verifier).runChecks":  {"run"},
	"(*github.com/paddock-dev/paddock/lifecycle.executor).runCommand": {"(*github.com/paddock-dev/paddock/lifecycle.executor).execStream"},
	"github.com/paddock-dev/paddock/sandbox.Run": {"(*github.com/paddock-dev/paddock/lifecycle.executor).runCommand", "github.com/paddock-dev/paddock/cmd/paddockd.sandboxCheck", "github.com/paddock-dev/paddock/sandbox.ProbeOverlay",
		// /bin/true in an empty directory, to learn whether anything can be confined here (sandboxprobe.go).
		"github.com/paddock-dev/paddock/lifecycle.trySandbox"},
	"(*github.com/paddock-dev/paddock/sandbox.Pool).Run": {"(*github.com/paddock-dev/paddock/lifecycle.executor).runCommand", "github.com/paddock-dev/paddock/cmd/paddockd.harnessCheck"},
}

// TestNothingAroundTheBroker reads every package of the module (tests
// aside) with its types, and fails on any use of a function that reaches a
// tool from a place the table above does not allow: every tool call, from
// every interface, passes through Broker.broker.
func TestNothingAroundTheBroker(t *testing.T) {
	if testing.Short() {
		t.Skip("loads and type-checks the whole module")
	}
	t.Parallel()
	cfg := &packages.Config{Mode: packages.NeedName | packages.NeedFiles | packages.NeedSyntax | packages.NeedTypes | packages.NeedTypesInfo, Dir: ".."}
	pkgs, err := packages.Load(cfg, "./...")
	if err != nil {
		t.Fatal(err)
	}
	uses := 0
	for _, p := range pkgs {
		for _, e := range p.Errors {
			t.Fatalf("%s: %v", p.PkgPath, e)
		}
		if strings.HasPrefix(p.PkgPath, "github.com/paddock-dev/paddock/bench/") {
			continue // benchmarks measure the mechanisms themselves, on no run
		}
		for _, f := range p.Syntax {
			uses += checkFile(t, p, f)
		}
	}
	// The table's functions are all in use: a rename would otherwise
	// make this test pass by finding nothing.
	if uses < len(reachers) {
		t.Fatalf("found %d uses of the %d functions that reach a tool: is the table stale?", uses, len(reachers))
	}
}

// checkFile checks the uses of the reachers in one file and counts them.
func checkFile(t *testing.T, p *packages.Package, f *ast.File) int {
	n := 0
	var stack []ast.Node
	ast.Inspect(f, func(node ast.Node) bool {
		if node == nil {
			stack = stack[:len(stack)-1]
			return true
		}
		stack = append(stack, node)
		id, ok := node.(*ast.Ident)
		if !ok {
			return true
		}
		fn, ok := p.TypesInfo.Uses[id].(*types.Func)
		if !ok {
			return true
		}
		allowed, watched := reachers[fn.FullName()]
		if !watched {
			return true
		}
		n++
		where := enclosing(p, stack)
		for _, a := range allowed {
			if a == where {
				return true
			}
		}
		t.Errorf("%s: %s is used in %s, around the broker (allowed: %s)", p.Fset.Position(id.Pos()), fn.FullName(), where, strings.Join(allowed, ", "))
		return true
	})
	return n
}

// enclosing names where a use is: "run" inside a brokered call's run, or
// the function declaration around it.
func enclosing(p *packages.Package, stack []ast.Node) string {
	for i := len(stack) - 1; i >= 0; i-- {
		switch n := stack[i].(type) {
		case *ast.FuncLit:
			if i >= 2 {
				if kv, ok := stack[i-1].(*ast.KeyValueExpr); ok {
					if key, ok := kv.Key.(*ast.Ident); ok && key.Name == "run" {
						if cl, ok := stack[i-2].(*ast.CompositeLit); ok && isBrokered(p, cl) {
							return "run"
						}
					}
				}
			}
		case *ast.FuncDecl:
			if obj, ok := p.TypesInfo.Defs[n.Name].(*types.Func); ok {
				return obj.FullName()
			}
		}
	}
	return "package level"
}

func isBrokered(p *packages.Package, cl *ast.CompositeLit) bool {
	named, ok := p.TypesInfo.TypeOf(cl).(*types.Named)
	return ok && named.Obj().Name() == "brokered" && named.Obj().Pkg().Path() == "github.com/paddock-dev/paddock/lifecycle"
}
