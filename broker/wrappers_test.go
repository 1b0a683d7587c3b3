package broker

import (
	"slices"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock"
	"mvdan.cc/sh/v3/syntax"
)

func words(ss ...string) []word {
	ws := make([]word, len(ss))
	for i, s := range ss {
		ws[i] = known(s)
	}
	return ws
}

func lits(ws []word) []string {
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = w.lit
		if !w.known {
			out[i] = "?"
		}
	}
	return out
}

// getopt reads options as glibc's getopt_long does with "+": prefixes,
// values attached or next, clusters, "--", the first operand.
func TestGetopt(t *testing.T) {
	g := gnu("p", "ab:c::", longOpt{"split-string", reqArg, "S"}, longOpt{"split-other", noArg, "O"}, longOpt{"color", optArg, "color"})
	cases := []struct {
		args []string
		opts string // key=value, or key
		rest string
		err  string
	}{
		{[]string{"-a", "x"}, "a", "x", ""},
		{[]string{"-ab", "v", "x"}, "a b=v", "x", ""},
		{[]string{"-abv", "x"}, "a b=v", "x", ""},
		{[]string{"-b", "-a", "x"}, "b=-a", "x", ""},
		{[]string{"-c", "x"}, "c", "x", ""},
		{[]string{"-cv", "x"}, "c=v", "x", ""},
		{[]string{"--split-s=v", "x"}, "S=v", "x", ""},
		{[]string{"--split-string", "--", "x"}, "S=--", "x", ""},
		{[]string{"--split-o", "x"}, "O", "x", ""},
		{[]string{"--split", "x"}, "", "", "ambiguous"},
		{[]string{"--col", "x"}, "color", "x", ""},
		{[]string{"--col=always", "x"}, "color=always", "x", ""},
		{[]string{"--split-o=v"}, "", "", "takes no value"},
		{[]string{"-a", "--", "-b"}, "a", "-b", ""},
		{[]string{"-", "-a"}, "", "- -a", ""},
		{[]string{"x", "-a"}, "", "x -a", ""},
		{[]string{"-x"}, "", "", "no option -x"},
		{[]string{"--nope"}, "", "", "no option --nope"},
		{[]string{"-b"}, "", "", "needs a value"},
		{[]string{"--help", "x"}, "help", "x", ""},
	}
	for _, tc := range cases {
		p := newGetopt(g, words(tc.args...))
		var got []string
		var err error
		for {
			o, ok, e := p.next()
			if e != nil || !ok {
				err = e
				break
			}
			if o.has {
				got = append(got, o.key+"="+o.value.lit)
			} else {
				got = append(got, o.key)
			}
		}
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: %v, want an error with %q", tc.args, err, tc.err)
			}
			continue
		}
		if err != nil || strings.Join(got, " ") != tc.opts || strings.Join(lits(p.rest()), " ") != tc.rest {
			t.Errorf("%q: %q rest %q (%v), want %q rest %q", tc.args, got, lits(p.rest()), err, tc.opts, tc.rest)
		}
	}
}

// splitString splits as GNU env -S does (the differential test runs
// the real env on more).
func TestSplitString(t *testing.T) {
	cases := []struct {
		in   string
		want []string
		bad  bool
	}{
		{"sh -c id", []string{"sh", "-c", "id"}, false},
		{"  a\t b ", []string{"a", "b"}, false},
		{`a 'b c' "d e" f\_g`, []string{"a", "b c", "d e", "f", "g"}, false},
		{`"a\_b" 'c\'d' 'e\\f' 'g\n'`, []string{"a b", "c'd", `e\f`, `g\n`}, false},
		{`a\tb \#c \$d \"e`, []string{"a\tb", "#c", "$d", `"e`}, false},
		{`a #b c`, []string{"a"}, false},
		{`a b#c`, []string{"a", "b#c"}, false},
		{`#a`, nil, false},
		{`a\cb c`, []string{"a"}, false},
		{`a '' b`, []string{"a", "", "b"}, false},
		{"", nil, false},
		{`a ${HOME}`, nil, true},
		{`a $HOME`, nil, true},
		{`a '${HOME}'`, []string{"a", "${HOME}"}, false},
		{`a \q`, nil, true},
		{`a 'b`, nil, true},
		{`a\`, nil, true},
		{`"a\c"`, nil, true},
		{"a\nb", nil, true},
		{"'a\nb'", []string{"a\nb"}, false},
		{`a #\q`, nil, true},
	}
	for _, tc := range cases {
		got, err := splitString(tc.in)
		if tc.bad {
			if err == nil {
				t.Errorf("%q: %q, want refused", tc.in, lits(got))
			}
			continue
		}
		if err != nil || !slices.Equal(lits(got), tc.want) && !(len(got) == 0 && len(tc.want) == 0) {
			t.Errorf("%q: %q (%v), want %q", tc.in, lits(got), err, tc.want)
		}
	}
}

// Each wrapper: the words it keeps, what it runs, what it sets and writes.
func TestWrapperReading(t *testing.T) {
	cases := []struct {
		argv             []string
		lang             syntax.LangVariant
		own, run, assign string
		err              bool
	}{
		{[]string{"env", "-iuX", "A=1", "B=", "cmd", "C=2"}, syntax.LangBash, "-iuX A=1 B=", "cmd C=2", "A B", false},
		{[]string{"env", "-S", "-u X A=1 cmd a", "b"}, syntax.LangBash, "-S -u X A=1 cmd a b", "cmd a b", "A", false},
		{[]string{"env", "--split-s=cmd a"}, syntax.LangBash, "--split-s=cmd a", "cmd a", "", false},
		{[]string{"env", "-", "A=1", "cmd"}, syntax.LangBash, "- A=1", "cmd", "A", false},
		{[]string{"env", "--help", "cmd"}, syntax.LangBash, "--help cmd", "", "", false},
		{[]string{"env", "--ignore", "cmd"}, syntax.LangBash, "", "", "", true},
		{[]string{"nice", "-5", "--adj", "3", "-n1", "cmd", "-n", "2"}, syntax.LangBash, "-5 --adj 3 -n1", "cmd -n 2", "", false},
		{[]string{"timeout", "-sKILL", "--kill=1", "5", "cmd", "-s"}, syntax.LangBash, "-sKILL --kill=1 5", "cmd -s", "", false},
		{[]string{"stdbuf", "-oL", "--err", "0", "cmd"}, syntax.LangBash, "-oL --err 0", "cmd", "", false},
		{[]string{"setsid", "-fw", "cmd"}, syntax.LangBash, "-fw", "cmd", "", false},
		{[]string{"xargs", "-n1", "cmd", "-n"}, syntax.LangBash, "-n1", "cmd -n ?", "", false},
		{[]string{"xargs", "-I{}", "cmd", "a{}b", "c"}, syntax.LangBash, "-I{}", "cmd ? c ?", "", false},
		{[]string{"xargs", "--process-slot-var=S"}, syntax.LangBash, "--process-slot-var=S", "echo ?", "S", false},
		{[]string{"command", "-p", "cmd"}, syntax.LangBash, "-p", "cmd", "", false},
		{[]string{"command", "-pv", "cmd"}, syntax.LangBash, "-pv cmd", "", "", false},
		{[]string{"exec", "--", "cmd"}, syntax.LangBash, "--", "cmd", "", false},
		{[]string{"exec", "--", "cmd"}, syntax.LangPOSIX, "", "-- cmd", "", false},
		{[]string{"exec", "-a", "x", "cmd"}, syntax.LangBash, "", "", "", true},
		{[]string{"time", "-o", "f", "cmd"}, syntax.LangBash, "-o f", "cmd", "", false},
		{[]string{"chroot", "--userspec=a", "/r", "cmd"}, syntax.LangBash, "--userspec=a /r", "cmd", "", false},
		{[]string{"chroot", "/r"}, syntax.LangBash, "", "", "", true},
	}
	for _, tc := range cases {
		w, err := wrappers[tc.argv[0]](words(tc.argv[1:]...), tc.lang)
		if tc.err {
			if err == nil {
				t.Errorf("%q: read, want refused", tc.argv)
			}
			continue
		}
		var assigns []string
		for _, a := range w.assigns {
			assigns = append(assigns, a.name)
		}
		if err != nil || strings.Join(lits(w.own), " ") != tc.own || strings.Join(lits(w.run), " ") != tc.run || strings.Join(assigns, " ") != tc.assign {
			t.Errorf("%q: own %q run %q assigns %q (%v), want %q, %q, %q", tc.argv, lits(w.own), lits(w.run), assigns, err, tc.own, tc.run, tc.assign)
		}
	}
}

// TestDecideRefusesWrapperTricks: what wrappers run, read as they read it
// (issue #29, item 4): env's split strings and assignments, find's -exec
// ends, what xargs hands its command. Each row was allowed before its fix,
// unless it says it held.
func TestDecideRefusesWrapperTricks(t *testing.T) {
	goflags := wrappersDef()
	goflags.Env = []string{"GOFLAGS"}
	xargsEnv := wrappersDef()
	xargsEnv.Tool["exec"] = paddock.ToolRule{Allow: []string{"echo", "xargs", "env"}}
	find := &paddock.AgentDefinition{Name: "find", Workspace: "write", Tools: []string{"exec"},
		Tool: map[string]paddock.ToolRule{"exec": {Allow: []string{"find", "echo", "xargs", "go test"}, Deny: []string{"go test -exec"}}}}
	mustRefuse(t, []refusal{
		// env -S / --split-string splits its value into a command line
		// (and GNU getopt takes any unambiguous prefix of a long option).
		{"env --split-string=sh -c id", wrappersDef(), Call{Argv: []string{"env", "--split-string=sh -c id"}}},
		{"env --split-s=sh -c id", wrappersDef(), Call{Argv: []string{"env", "--split-s=sh -c id"}}},
		{"env -Ssh -c id, one word", wrappersDef(), Call{Argv: bash(`env -S'sh -c id'`)}},
		{"env -iS, clustered", wrappersDef(), Call{Argv: bash(`env -iS'sh -c id'`)}},
		{"env -S with -S inside (held: -S was refused)", wrappersDef(), Call{Argv: []string{"env", "-S", "-S'sh -c id'"}}},
		// env's NAME=VALUE words were never read as assignments.
		{"env GOFLAGS=-toolexec= go test", goflags, Call{Argv: bash(`env GOFLAGS=-toolexec=docs/x.sh go test ./...`)}},
		{"env LD_PRELOAD echo", wrappersDef(), Call{Argv: bash(`env LD_PRELOAD=docs/x.so echo`)}},
		{"env -S LD_PRELOAD echo", wrappersDef(), Call{Argv: bash(`env -S'LD_PRELOAD=docs/x.so echo'`)}},
		{"BASH_ENV before bash -c", wrappersDef(), Call{Argv: bash(`BASH_ENV=docs/x.sh bash -c echo`)}},
		// find's "+" ends a command only after {}; a file name find puts in.
		{"find -exec + is an argument", find, Call{Argv: []string{"find", ".", "-exec", "go", "test", "+", "-exec=docs/x.sh", ";"}}},
		{"find -exec {} as a flag", find, Call{Argv: []string{"find", ".", "-name", "-exec=*", "-exec", "go", "test", "{}", ";"}}},
		{"find -exec from an expansion", find, Call{Argv: bash(`find . "$1" curl x \;`, "_", "-exec")}},
		// xargs hands its command the words it reads.
		{"xargs env", xargsEnv, Call{Argv: bash(`echo sh -c id | xargs env`)}},
		{"xargs go test -exec", find, Call{Argv: bash(`echo -exec=docs/x.sh | xargs go test`)}},
	})
}
