package manifest

import (
	"reflect"
	"strings"
	"testing"
)

func TestDetect(t *testing.T) {
	files := func(m map[string]string) func(string) ([]byte, bool) {
		return func(p string) ([]byte, bool) { s, ok := m[p]; return []byte(s), ok }
	}
	got := Detect(files(map[string]string{"go.mod": "module x"}))
	if !reflect.DeepEqual(got.Types, []string{"go"}) || len(got.Verify()) != 3 || got.Verify()[2][1] != "test" {
		t.Fatalf("go: %+v", got)
	}
	got = Detect(files(map[string]string{"package.json": `{"scripts":{"test":"jest","build":"tsc"}}`}))
	if v := got.Verify(); len(v) != 2 || v[0][0] != "sh" || !strings.HasSuffix(v[0][2], "; tsc") || !strings.HasSuffix(v[1][2], "; jest") {
		t.Fatalf("node: %+v", got.Verify())
	}
	got = Detect(files(map[string]string{"package.json": `{"scripts":{"test":"echo \"Error: no test specified\" && exit 1"}}`}))
	if len(got.Verify()) != 0 {
		t.Fatalf("npm's placeholder test: %+v", got.Verify())
	}
	got = Detect(files(map[string]string{"Makefile": "all:\n\ttrue\ntest:\n\tgo test\n"}))
	if !reflect.DeepEqual(got.Verify(), [][]string{{"make", "-f", ".paddock/manifest/Makefile", "test"}}) || string(got.Files["Makefile"]) == "" {
		t.Fatalf("make: %+v", got.Verify())
	}
	if got = Detect(files(nil)); len(got.Types) != 0 || len(got.Verify()) != 0 {
		t.Fatalf("nothing: %+v", got)
	}
}
