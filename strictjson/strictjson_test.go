package strictjson

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestCheck(t *testing.T) {
	for _, s := range []string{`{}`, `{"a":1,"b":{"a":2}}`, `{"a":[{"x":1},{"x":2}]}`, `[1,2,{"a":"a"}]`,
		`{"a":"b","c":["a","a"]}`, `{"path":"caf\u00e9"}`, `{"p":"\ud83d\ude00"}`, `{"p":"\ufffd"}`, `{"p":"` + "\ufffd" + `"}`,
		`{"a":"x\\ud800"}`, ` {"a":1} `, `"x"`} {
		if err := Check([]byte(s)); err != nil {
			t.Errorf("%s: %v", s, err)
		}
	}
	for s, key := range map[string]string{
		`{"a":1,"a":2}`:                  "a",
		`{"x":{"b":1,"b":1}}`:            "x.b",
		`[{"k":1,"k":1}]`:                "[0].k",
		`{"path":"a","Path":"b"}`:        "Path",
		`{"e":[{},{"old":1,"OLD":2}]}`:   "e[1].OLD",
		`{"kind":1,"\u212aind":2}`:       "\u212aind", // Kelvin sign: encoding/json folds it to k
		`{"path":"a` + "\xff" + `"}`:     "path",
		`{"e":["ok","a` + "\xc3" + `"]}`: "e[1]",
		`{"p` + "\xfe" + `":1}`:          "p\ufffd",
		`{"path":"\udc80"}`:              "path",
		`{"path":"\ud800x"}`:             "path",
		`{"path":"\ud800\u0041"}`:        "path",
		`{"path":"\ud800"}`:              "path",
		`{"a":1} {"a":2}`:                "",
		`{"a":1}x`:                       "",
		`{"a":`:                          "",
		strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1): "",
	} {
		err := Check([]byte(s))
		e, ok := err.(*Error)
		if !ok {
			t.Errorf("%.50q accepted", s)
			continue
		}
		if key != "" && e.Key != key {
			t.Errorf("%.50q: refused at %q (%v), want %q", s, e.Key, e, key)
		}
	}
}

type inner struct {
	Old string `json:"old_string"`
}

type embedded struct {
	Mode string `json:"mode"`
}

type args struct {
	embedded
	Path  string           `json:"path"`
	Edits []inner          `json:"edits"`
	One   *inner           `json:"one"`
	Named map[string]inner `json:"named"`
	Raw   json.RawMessage  `json:"raw"`
	When  time.Time        `json:"when"`
	Plain string
	//lint:ignore U1000 an unexported field is no JSON field: a key "skip" is unknown
	skip string
}

func TestUnmarshal(t *testing.T) {
	var a args
	ok := `{"path":"p","mode":"0644","edits":[{"old_string":"x"}],"one":{"old_string":"y"},"named":{"A":{"old_string":"z"}},` +
		`"raw":{"ANY":1,"x":2},"when":"2026-01-02T03:04:05Z","Plain":"q"}`
	if err := Unmarshal([]byte(ok), &a); err != nil {
		t.Fatal(err)
	}
	if a.Path != "p" || a.Mode != "0644" || a.Edits[0].Old != "x" || a.One.Old != "y" || a.Named["A"].Old != "z" || a.Plain != "q" {
		t.Fatalf("%+v", a)
	}
	for s, key := range map[string]string{
		`{"PATH":"p"}`:    "PATH",
		`{"Path":"p"}`:    "Path",
		`{"Mode":"0644"}`: "Mode",
		`{"edits":[{"old_string":"x"},{"Old_String":"y"}]}`: "edits[1].Old_String",
		`{"one":{"OLD_STRING":"y"}}`:                        "one.OLD_STRING",
		`{"named":{"a":{"old_STRING":"y"}}}`:                "named.a.old_STRING",
		`{"plain":"q"}`:                                     "plain",
		`{"skip":"q"}`:                                      "skip",
		`{"bogus":1}`:                                       "bogus",
		`{"path":1}`:                                        "path",
		`{"path":"a","path":"b"}`:                           "path",
	} {
		var a args
		err := Unmarshal([]byte(s), &a)
		e, ok := err.(*Error)
		if !ok || e.Key != key {
			t.Errorf("%s: %v, want a refusal at %q", s, err, key)
		}
	}
}
