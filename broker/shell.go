package broker

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// A command is one simple command a request would run: its words, each
// either known exactly (lit) or not (an expansion, a glob: its value is
// decided when the shell runs), and the environment names it assigns.
type command struct {
	words   []word
	assigns []assign
	// writes are the files its output redirections (or the program
	// itself: find -fprint, time -o) write.
	writes []word
	// chdir: the command changes the directory later commands of the line
	// run in (cd, pushd, popd), or runs one in another (env -C, find
	// -execdir): a relative path a redirection writes is then not the
	// path the rules would read.
	chdir bool
}

// assign is a variable a command line sets: its name, and its value if
// known.
type assign struct {
	name  string
	value word
}

type word struct {
	lit   string
	known bool
}

func (c command) String() string {
	var b strings.Builder
	for i, w := range c.words {
		if i > 0 {
			b.WriteByte(' ')
		}
		if w.known {
			b.WriteString(w.lit)
		} else {
			b.WriteString("<expansion>")
		}
	}
	return b.String()
}

// errUnsure is why a command line is denied when it cannot be read with
// confidence: a rule is only as good as the reading of what it is applied to.
type errUnsure struct{ why string }

func (e *errUnsure) Error() string { return e.why }

func unsure(format string, args ...any) error {
	return &errUnsure{why: fmt.Sprintf(format, args...)}
}

// maxDepth bounds nested shells (sh -c "sh -c '…'") and evals.
const maxDepth = 8

// commandsOf returns every simple command argv would run: argv itself, or,
// when it is a shell's -c, eval or another command-running wrapper, what it
// runs, recursively (pipelines, && / || / ; chains, command and process
// substitution, function bodies, sh -c and eval strings included).
func commandsOf(argv []string) ([]command, error) {
	ws := make([]word, len(argv))
	for i, a := range argv {
		ws[i] = word{lit: a, known: true}
	}
	var out []command
	err := expand(command{words: ws}, 0, syntax.LangBash, &out)
	return out, err
}

// langOf is the language a shell reads: a line is parsed as the shell that
// runs it reads it (dash, Debian's sh, reads ((…)) as two subshells and
// &> as & then >, where bash reads arithmetic and a redirection).
func langOf(shell string) syntax.LangVariant {
	switch shell {
	case "bash":
		return syntax.LangBash
	case "zsh":
		return syntax.LangZsh
	case "ksh", "mksh":
		return syntax.LangMirBSDKorn
	}
	return syntax.LangPOSIX
}

// expand adds c, or what c runs, to out; lang is the language of the
// shell whose line c is part of (for eval).
func expand(c command, depth int, lang syntax.LangVariant, out *[]command) error {
	if depth > maxDepth {
		return unsure("commands nested deeper than %d levels", maxDepth)
	}
	if len(c.words) == 0 {
		if len(c.assigns) > 0 {
			*out = append(*out, c)
		}
		return nil
	}
	name := c.words[0]
	if !name.known {
		return unsure("the command's name is an expansion; which program runs is decided only when the shell runs")
	}
	base := path.Base(name.lit)
	switch {
	case shells[base]:
		script, ok, err := shellScript(base, c.words[1:])
		if err != nil {
			return err
		}
		if ok {
			keepAssigns(c, out)
			return parseScript(script, depth+1, langOf(base), out)
		}
	case base == "set":
		if err := safeSet(c.words[1:]); err != nil {
			return err
		}
	case base == "eval":
		var parts []string
		for _, w := range c.words[1:] {
			if !w.known {
				return unsure("eval of an expansion")
			}
			parts = append(parts, w.lit)
		}
		keepAssigns(c, out)
		return parseScript(strings.Join(parts, " "), depth+1, lang, out)
	case wrappers[base] != nil:
		w, err := wrappers[base](c.words[1:], lang)
		if err != nil {
			return err
		}
		// The wrapper itself is checked too: a rule may name it.
		*out = append(*out, command{words: append([]word{name}, w.own...),
			assigns: append(slices.Clone(c.assigns), w.assigns...), writes: w.writes, chdir: w.chdir})
		if len(w.run) == 0 {
			return nil
		}
		return expand(command{words: w.run}, depth+1, lang, out)
	case base == "find":
		return findExec(c, depth, lang, out)
	case runners[base]:
		return unsure("%s runs a command given in its arguments, after options this reading does not model; run that command itself", base)
	case base == "cd" || base == "pushd" || base == "popd":
		c.chdir = true
	}
	*out = append(*out, c)
	return nil
}

// keepAssigns keeps the variables a line sets for a shell or an eval whose
// script is read in its place (BASH_ENV=f bash -c …).
func keepAssigns(c command, out *[]command) {
	if len(c.assigns) > 0 {
		*out = append(*out, command{assigns: c.assigns})
	}
}

// shells are the programs whose -c runs a script.
var shells = map[string]bool{"sh": true, "bash": true, "dash": true, "zsh": true, "ksh": true, "ash": true, "mksh": true}

// shellScript finds the script of `sh [options] -c SCRIPT [args]`. Without
// -c the shell runs a file or its stdin: ok is false and the shell is
// matched as a command like any other. Only options that change nothing
// about what runs are read (-e, -u, -x, -v, -o pipefail, …): an
// interactive or login shell first runs startup files the agent can
// write, --rcfile takes the word after it, and "-" ends the options.
func shellScript(shell string, args []word) (string, bool, error) {
	// zsh reads $ZDOTDIR/.zshenv (HOME's, which the run's commands may
	// write) before any script, unless -f (NO_RCS) says not to.
	flagSet, noRC := "ceuxv", true
	if shell == "zsh" {
		flagSet, noRC = "ceuxvf", false
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !a.known {
			return "", false, unsure("a shell's option is an expansion")
		}
		switch {
		case a.lit == "--norc" || a.lit == "--noprofile" || a.lit == "--posix":
			continue
		case a.lit == "-o" || a.lit == "+o":
			if i+1 >= len(args) || !args[i+1].known || !safeShellOption[args[i+1].lit] {
				return "", false, unsure("a shell option this reading does not know")
			}
			i++
			continue
		case a.lit == "-" || a.lit == "--" || strings.HasPrefix(a.lit, "--"):
			return "", false, unsure("the shell option %q", a.lit)
		case !strings.HasPrefix(a.lit, "-") && !strings.HasPrefix(a.lit, "+"):
			return "", false, nil // a script file: the shell is the command
		}
		flags := a.lit[1:]
		if strings.Trim(flags, flagSet) != "" {
			return "", false, unsure("the shell option %q (an interactive or login shell runs startup files first)", a.lit)
		}
		noRC = noRC || strings.ContainsRune(flags, 'f') && a.lit[0] == '-'
		if strings.ContainsRune(flags, 'c') && a.lit[0] == '-' {
			if !noRC {
				return "", false, unsure("zsh reads ~/.zshenv before its -c script; give -f")
			}
			if i+1 >= len(args) {
				return "", false, unsure("a shell's -c without a script")
			}
			s := args[i+1]
			if !s.known {
				return "", false, unsure("a shell's script is an expansion")
			}
			if strings.HasPrefix(s.lit, "-") {
				return "", false, unsure("a shell's script that reads as an option")
			}
			return s.lit, true, nil
		}
	}
	return "", false, nil
}

// safeShellOption are the -o options a shell line may set.
var safeShellOption = map[string]bool{"errexit": true, "nounset": true, "pipefail": true, "xtrace": true, "noclobber": true, "noglob": true}

// safeSet checks set's arguments: the options above, or -- and the
// positional parameters. set -k (any word of a command an assignment),
// set -a with an assignment elsewhere, and the rest are not read here.
func safeSet(args []word) error {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !a.known {
			return unsure("an argument of set is an expansion")
		}
		switch {
		case a.lit == "--":
			return nil
		case a.lit == "-o" || a.lit == "+o":
			if i+1 >= len(args) || !args[i+1].known || !safeShellOption[args[i+1].lit] {
				return unsure("a set -o option this reading does not know")
			}
			i++
		case (strings.HasPrefix(a.lit, "-") || strings.HasPrefix(a.lit, "+")) && len(a.lit) > 1 && strings.Trim(a.lit[1:], "euxvCf") == "":
		default:
			return unsure("set %s", a.lit)
		}
	}
	return nil
}

// findExec checks find itself, the files its -fprint, -fprint0, -fprintf
// and -fls write, and the commands its -exec, -execdir, -ok and -okdir run.
// A command's words run to ";", or (-exec, -execdir) to a "+" right after
// a word holding "{}" (any other "+" is an argument); a word holding "{}"
// is a file name find puts there. A
// word of find that is an expansion is refused: at run time it may be
// -exec, or the ";" that ends a command early so that its arguments are
// find's again.
func findExec(c command, depth int, lang syntax.LangVariant, out *[]command) error {
	self := command{words: c.words[:1], assigns: c.assigns}
	for i := 1; i < len(c.words); i++ {
		w := c.words[i]
		if !w.known {
			return unsure("an argument of find is an expansion (it may be -exec, or end one)")
		}
		switch w.lit {
		case "-exec", "-execdir", "-ok", "-okdir":
			plus := w.lit == "-exec" || w.lit == "-execdir" // -ok asks for each file: no "+"
			j := i + 1
			for j < len(c.words) && c.words[j].known && c.words[j].lit != ";" && !(plus && c.words[j].lit == "+" && j > i+1 && strings.Contains(c.words[j-1].lit, "{}")) {
				j++
			}
			if j >= len(c.words) || !c.words[j].known {
				if j < len(c.words) {
					return unsure("an argument of find is an expansion (it may be -exec, or end one)")
				}
				return unsure("find's %s without its ; or {} +", w.lit)
			}
			var run []word
			for _, a := range c.words[i+1 : j] {
				if strings.Contains(a.lit, "{}") {
					a = word{}
				}
				run = append(run, a)
			}
			if len(run) == 0 {
				return unsure("find's %s without a command", w.lit)
			}
			if strings.HasSuffix(w.lit, "dir") {
				self.chdir = true
			}
			if err := expand(command{words: run}, depth+1, lang, out); err != nil {
				return err
			}
			i = j
			continue
		case "-fprint", "-fprint0", "-fprintf", "-fls":
			if i+1 < len(c.words) {
				self.writes = append(self.writes, c.words[i+1])
			}
		}
		self.words = append(self.words, w)
	}
	*out = append(*out, self)
	return nil
}

// parseScript parses a shell script and adds every command it would run.
// What the bash parser and the shell that runs the line could read
// differently (a carriage return, a NUL, a comment that ends in a
// backslash), and what evaluates text as code at run time (arithmetic,
// array subscripts, [[ -v ]]), is not read: it is refused.
func parseScript(script string, depth int, lang syntax.LangVariant, out *[]command) error {
	if strings.ContainsAny(script, "\r\x00") {
		return unsure("a carriage return or a NUL in a shell line")
	}
	for _, line := range strings.Split(script, "\n") {
		if strings.Contains(line, "#") && strings.HasSuffix(strings.TrimRight(line, " \t"), "\\") {
			return unsure("a line with a # that ends in a backslash (shells disagree on where it ends)")
		}
	}
	f, err := syntax.NewParser(syntax.Variant(lang)).Parse(strings.NewReader(script), "")
	if err != nil {
		return unsure("the shell line does not parse: %v", err)
	}
	var werr error
	fail := func(err error) bool {
		if werr == nil {
			werr = err
		}
		return false
	}
	syntax.Walk(f, func(n syntax.Node) bool {
		if werr != nil {
			return false
		}
		switch n := n.(type) {
		case *syntax.CallExpr:
			c := command{}
			for _, a := range n.Assigns {
				as, err := assignOf(a)
				if err != nil {
					return fail(err)
				}
				c.assigns = append(c.assigns, as)
			}
			for _, w := range n.Args {
				c.words = append(c.words, literal(w))
			}
			werr = expand(c, depth, lang, out)
		case *syntax.DeclClause:
			// declare, local, export, readonly, typeset, nameref: every
			// name they set is an assignment; their options are not read.
			c := command{}
			for _, a := range n.Args {
				if a.Name == nil {
					return fail(unsure("%s with an option or a name that is an expansion", n.Variant.Value))
				}
				as, err := assignOf(a)
				if err != nil {
					return fail(err)
				}
				c.assigns = append(c.assigns, as)
			}
			*out = append(*out, c)
		case *syntax.ForClause:
			switch l := n.Loop.(type) {
			case *syntax.WordIter:
				*out = append(*out, command{assigns: []assign{{name: l.Name.Value}}})
			default:
				return fail(unsure("a C-style for loop (arithmetic)"))
			}
		case *syntax.ArithmExp, *syntax.ArithmCmd, *syntax.LetClause:
			return fail(unsure("arithmetic evaluates the text it is given as code"))
		case *syntax.Assign:
			if n.Index != nil {
				return fail(unsure("an array subscript is arithmetic"))
			}
		case *syntax.ParamExp:
			if n.Index != nil || n.Excl || n.NestedParam != nil {
				return fail(unsure("a subscript or an indirect expansion"))
			}
			if n.Exp != nil && (n.Exp.Op == syntax.AssignUnset || n.Exp.Op == syntax.AssignUnsetOrNull) && n.Param != nil {
				*out = append(*out, command{assigns: []assign{{name: n.Param.Value}}})
			}
		case *syntax.UnaryTest:
			if n.Op == syntax.TsVarSet || n.Op == syntax.TsRefVar {
				return fail(unsure("[[ -v ]] evaluates a subscript"))
			}
		case *syntax.BinaryTest:
			switch n.Op {
			case syntax.TsEql, syntax.TsNeq, syntax.TsLeq, syntax.TsGeq, syntax.TsLss, syntax.TsGtr:
				return fail(unsure("[[ -eq ]] and the like evaluate their operands as arithmetic"))
			}
		case *syntax.Redirect:
			if n.N != nil && strings.HasPrefix(n.N.Value, "{") {
				// bash's {NAME}>FILE sets NAME to the descriptor it opens.
				*out = append(*out, command{assigns: []assign{{name: strings.Trim(n.N.Value, "{}")}}})
			}
			if n.Word != nil && redirectWrites(n.Op, n.Word) {
				*out = append(*out, command{writes: []word{literal(n.Word)}})
			}
		}
		return true
	})
	return werr
}

// redirectWrites: a redirection opens its word for writing. Every
// operator with > in it does, on any descriptor (2>F, 3<>F, >|F, &>F,
// &>>F, and zsh's clobbering forms), except >& with a descriptor (>&2,
// 2>&1, >&-, >&3-): bash reads [1]>&F and >&F with any other word as &>F.
// (&> and &>> are bash's: the POSIX parser, dash's, refuses them.)
func redirectWrites(op syntax.RedirOperator, w *syntax.Word) bool {
	switch op {
	case syntax.RdrOut, syntax.AppOut, syntax.RdrInOut, syntax.RdrClob, syntax.AppClob,
		syntax.RdrAll, syntax.RdrAllClob, syntax.AppAll, syntax.AppAllClob:
		return true
	case syntax.DplOut:
		l := literal(w)
		return !l.known || !isDescriptor(l.lit)
	}
	return false
}

// isDescriptor: the word of >& names a descriptor (digits), closes one (-)
// or moves one (digits then -).
func isDescriptor(s string) bool {
	return strings.Trim(strings.TrimSuffix(s, "-"), "0123456789") == ""
}

// assignOf reads one assignment: its name and, if known, its value. An
// assignment to an array element is arithmetic; an array's values are
// words like any other (their substitutions are walked).
func assignOf(a *syntax.Assign) (assign, error) {
	if a.Name == nil {
		return assign{}, unsure("an assignment without a name")
	}
	if a.Index != nil {
		return assign{}, unsure("an array subscript is arithmetic")
	}
	as := assign{name: a.Name.Value, value: word{known: true}}
	if a.Value != nil {
		as.value = literal(a.Value)
	}
	if a.Array != nil {
		as.value = word{}
	}
	return as, nil
}

// literal resolves a word that holds no expansion: quotes removed,
// backslashes applied. A glob, a brace, a tilde or any expansion makes the
// word unknown.
func literal(w *syntax.Word) word {
	var b strings.Builder
	for _, p := range w.Parts {
		switch p := p.(type) {
		case *syntax.Lit:
			s, ok := unquoted(p.Value)
			if !ok {
				return word{}
			}
			b.WriteString(s)
		case *syntax.SglQuoted:
			if p.Dollar {
				return word{}
			}
			b.WriteString(p.Value)
		case *syntax.DblQuoted:
			if p.Dollar {
				return word{}
			}
			for _, q := range p.Parts {
				l, ok := q.(*syntax.Lit)
				if !ok {
					return word{}
				}
				b.WriteString(dquoted(l.Value))
			}
		default:
			return word{}
		}
	}
	return word{lit: b.String(), known: true}
}

// unquoted applies backslashes outside quotes; a glob, brace or tilde
// character left unescaped means the shell would expand the word ("{}"
// aside).
func unquoted(s string) (string, bool) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\' && i+1 < len(s):
			i++
			if s[i] != '\n' {
				b.WriteByte(s[i])
			}
		case c == '{' && i+1 < len(s) && s[i+1] == '}':
			// {} is no brace expansion (that takes a comma or ..): find's
			// file name, xargs' replace string.
			b.WriteString("{}")
			i++
		case strings.IndexByte("*?[{~", c) >= 0:
			return "", false
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), true
}

// dquoted applies the backslashes that mean something inside double quotes.
func dquoted(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("$`\"\\\n", s[i+1]) >= 0 {
			i++
			if s[i] == '\n' {
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// runners are programs that run a command given in their arguments whose
// option grammar is not modelled here (wrappers.go models those it is):
// what they would run cannot be read with confidence, so a narrowed line
// that calls one is refused rather than matched by the runner's name
// alone (flock /tmp/l rm … under a deny of rm).
var runners = map[string]bool{
	// util-linux
	"ionice": true, "flock": true, "unshare": true, "nsenter": true, "taskset": true, "chrt": true,
	"setpriv": true, "prlimit": true, "runuser": true, "su": true, "script": true, "setarch": true,
	"linux32": true, "linux64": true, "i386": true, "x86_64": true, "uclampset": true,
	// privilege and confinement tools
	"sudo": true, "doas": true, "pkexec": true, "capsh": true, "fakeroot": true, "fakechroot": true,
	"firejail": true, "bwrap": true, "proot": true, "systemd-run": true, "systemd-nspawn": true, "cgexec": true,
	// tracers, profilers and the like
	"strace": true, "ltrace": true, "valgrind": true, "perf": true, "gdb": true, "catchsegv": true,
	"numactl": true, "nocache": true, "unbuffer": true, "watch": true, "parallel": true, "busybox": true,
	"toybox": true, "rlwrap": true, "expect": true, "dbus-run-session": true, "ssh-agent": true,
}
