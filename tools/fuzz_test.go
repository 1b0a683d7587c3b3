package tools

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// FuzzOpen: whatever path an agent gives, a successful open lies inside the
// root. The oracle asks the kernel, through the opened descriptor, where the
// file is (/proc/self/fd/N), not the resolver.
func FuzzOpen(f *testing.F) {
	for _, ec := range escapeCases {
		f.Add(ec.path(&fixture{ws: "/ws", outside: "/outside", evil: "/ws-evil"}))
	}
	for _, s := range []string{"a.txt", "sub/b.txt", "ok-link", "sub/deep/../b.txt", "./a.txt", "sub//b.txt", "/ws/a.txt"} {
		f.Add(s)
	}
	fx := newFixture(f)
	wsReal, _ := filepath.EvalSymlinks(fx.ws)
	f.Fuzz(func(t *testing.T, p string) {
		rel, err := fx.root.Rel(strings.ReplaceAll(p, "/ws", fx.ws))
		if err != nil {
			return
		}
		file, _, err := fx.root.OpenRead(rel)
		if err != nil {
			return
		}
		defer file.Close()
		where, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(file.Fd())))
		if err != nil {
			t.Skip("no /proc")
		}
		if where != wsReal && !strings.HasPrefix(where, wsReal+"/") {
			t.Fatalf("%q opened %s, outside %s", p, where, wsReal)
		}
	})
}
