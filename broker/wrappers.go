package broker

import (
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// A wrapper is a program (or a shell builtin) that runs another command
// after its own options: env, nice, nohup, timeout, stdbuf, setsid,
// chroot, GNU time, xargs, and the builtins command, exec and builtin.
// Each is read with its real grammar (getopt.go), so that the broker
// checks the command it really runs, the variables it really sets and
// the files it really writes; what a grammar cannot settle is refused.
// find -exec is read in findExec; a shell's -c in shellScript.

// wrapped is what a wrapper's arguments say.
type wrapped struct {
	// own are the wrapper's own arguments (its options), checked with its
	// name against the rules: a rule may name the wrapper.
	own []word
	// run is the command it runs; none: it runs nothing.
	run []word
	// assigns are the variables it sets for run (env NAME=VALUE, xargs
	// --process-slot-var), writes the files it writes itself.
	assigns []assign
	writes  []word
	// chdir: run starts in another directory (env -C).
	chdir bool
}

type wrapper func(args []word, lang syntax.LangVariant) (wrapped, error)

var wrappers = map[string]wrapper{
	"env":     envArgs,
	"nice":    niceArgs,
	"nohup":   nohupArgs,
	"timeout": timeoutArgs,
	"stdbuf":  optionsThenCommand(gnu("stdbuf", "i:o:e:", longOpt{"input", reqArg, "i"}, longOpt{"output", reqArg, "o"}, longOpt{"error", reqArg, "e"})),
	"setsid":  optionsThenCommand(setsidGrammar),
	"chroot":  chrootArgs,
	"time":    timeArgs,
	"xargs":   xargsArgs,
	"command": commandArgs,
	"exec":    execArgs,
	"builtin": builtinArgs,
}

// known is a word known to be lit.
func known(lit string) word { return word{lit: lit, known: true} }

// optionsThenCommand is a wrapper whose options change nothing of what it
// runs: the command after them.
func optionsThenCommand(g *optGrammar) wrapper {
	return func(args []word, _ syntax.LangVariant) (wrapped, error) {
		p := newGetopt(g, args)
		for {
			o, ok, err := p.next()
			if err != nil {
				return wrapped{}, err
			}
			if !ok {
				break
			}
			if g.exits(o) {
				return wrapped{own: args}, nil
			}
		}
		return wrapped{own: args[:p.i], run: p.rest()}, nil
	}
}

var setsidGrammar = &optGrammar{prog: "setsid", short: "Vhcfw",
	long:  []longOpt{{"ctty", noArg, "c"}, {"fork", noArg, "f"}, {"wait", noArg, "w"}, {"help", noArg, "h"}, {"version", noArg, "V"}},
	quits: []string{"h", "V"}}

var envGrammar = gnu("env", "C:iS:u:v0",
	longOpt{"ignore-environment", noArg, "i"}, longOpt{"null", noArg, "0"}, longOpt{"unset", reqArg, "u"},
	longOpt{"chdir", reqArg, "C"}, longOpt{"default-signal", optArg, "default-signal"},
	longOpt{"ignore-signal", optArg, "ignore-signal"}, longOpt{"block-signal", optArg, "block-signal"},
	longOpt{"list-signal-handling", noArg, "list-signal-handling"}, longOpt{"debug", noArg, "v"},
	longOpt{"split-string", reqArg, "S"})

// maxSplits bounds env -S inside env -S.
const maxSplits = 8

// envArgs reads GNU env: its options (-S splits its value into words
// that are read again from the start, options included, in front of the
// rest), a lone "-" (-i), the NAME=VALUE words (every word with an "="),
// then the command.
func envArgs(args []word, _ syntax.LangVariant) (wrapped, error) {
	p := newGetopt(envGrammar, args)
	var w wrapped
	split := 0
	for {
		o, ok, err := p.next()
		if err != nil {
			return wrapped{}, err
		}
		if !ok {
			break
		}
		switch {
		case envGrammar.exits(o):
			return wrapped{own: args}, nil
		case o.key == "S":
			if !o.value.known {
				return wrapped{}, unsure("env -S of an expansion")
			}
			if split++; split > maxSplits {
				return wrapped{}, unsure("env -S nested more than %d times", maxSplits)
			}
			words, err := splitString(o.value.lit)
			if err != nil {
				return wrapped{}, err
			}
			p.restart(append(words, p.rest()...))
		case o.key == "C":
			w.chdir = true
		}
	}
	rest := p.rest()
	if len(rest) > 0 && rest[0].known && rest[0].lit == "-" {
		rest = rest[1:]
	}
	for len(rest) > 0 {
		a := rest[0]
		if !a.known {
			return wrapped{}, unsure("an argument of env is an expansion (a NAME=VALUE or the command, decided only when the shell runs)")
		}
		name, value, ok := strings.Cut(a.lit, "=")
		if !ok {
			break
		}
		w.assigns = append(w.assigns, assign{name: name, value: known(value)})
		rest = rest[1:]
	}
	w.run = rest
	if split > 0 {
		// The command came out of an argument: every word is env's.
		w.own = args
	} else {
		w.own = args[:len(args)-len(rest)]
	}
	return w, nil
}

// niceArgs reads GNU nice: -N, --N and -+N are adjustments (nice reads
// them before getopt), then -n N, --adjustment=N, and the command.
func niceArgs(args []word, _ syntax.LangVariant) (wrapped, error) {
	g := gnu("nice", "n:", longOpt{"adjustment", reqArg, "n"})
	i := 0
	for i < len(args) {
		a := args[i]
		if !a.known {
			return wrapped{}, unsure("an argument of nice is an expansion")
		}
		if s := a.lit; len(s) > 1 && s[0] == '-' {
			d := 1
			if s[1] == '-' || s[1] == '+' {
				d = 2
			}
			if d < len(s) && s[d] >= '0' && s[d] <= '9' {
				i++
				continue
			}
		}
		// nice reads one option with getopt from here, then looks again.
		p := newGetopt(g, args[i:])
		o, ok, err := p.next()
		if err != nil {
			return wrapped{}, err
		}
		if ok && g.exits(o) {
			return wrapped{own: args}, nil
		}
		// (-n takes the rest of its word: nothing is left of a cluster.)
		i += p.i
		if !ok {
			break
		}
	}
	return wrapped{own: args[:i], run: args[i:]}, nil
}

// nohupArgs: nohup takes only --help and --version. When its output is a
// terminal it writes nohup.out (in the working directory, else in HOME).
func nohupArgs(args []word, lang syntax.LangVariant) (wrapped, error) {
	w, err := optionsThenCommand(gnu("nohup", ""))(args, lang)
	if len(w.run) > 0 {
		w.writes = []word{known("nohup.out")}
	}
	return w, err
}

var timeoutGrammar = gnu("timeout", "k:s:v",
	longOpt{"foreground", noArg, "foreground"}, longOpt{"kill-after", reqArg, "k"},
	longOpt{"preserve-status", noArg, "preserve-status"}, longOpt{"signal", reqArg, "s"}, longOpt{"verbose", noArg, "v"})

// timeoutArgs reads GNU timeout: options, the duration, the command.
func timeoutArgs(args []word, lang syntax.LangVariant) (wrapped, error) {
	w, err := optionsThenCommand(timeoutGrammar)(args, lang)
	if err != nil || len(w.run) == 0 {
		return w, err
	}
	w.own, w.run = args[:len(w.own)+1], w.run[1:]
	return w, nil
}

var chrootGrammar = gnu("chroot", "", longOpt{"groups", reqArg, "groups"}, longOpt{"userspec", reqArg, "userspec"}, longOpt{"skip-chdir", noArg, "skip-chdir"})

// chrootArgs reads GNU chroot: options, the new root, the command; with no
// command it runs $SHELL -i, an interactive shell that reads startup files.
func chrootArgs(args []word, _ syntax.LangVariant) (wrapped, error) {
	p := newGetopt(chrootGrammar, args)
	for {
		o, ok, err := p.next()
		if err != nil {
			return wrapped{}, err
		}
		if !ok {
			break
		}
		if chrootGrammar.exits(o) {
			return wrapped{own: args}, nil
		}
	}
	switch rest := p.rest(); len(rest) {
	case 0:
		return wrapped{own: args}, nil // a missing operand: it runs nothing
	case 1:
		return wrapped{}, unsure("chroot without a command runs an interactive $SHELL")
	default:
		return wrapped{own: args[:p.i+1], run: rest[1:], chdir: true}, nil
	}
}

var timeGrammar = &optGrammar{prog: "time", short: "af:o:pqvhV",
	long: []longOpt{{"append", noArg, "a"}, {"format", reqArg, "f"}, {"output", reqArg, "o"}, {"portability", noArg, "p"},
		{"quiet", noArg, "q"}, {"verbose", noArg, "v"}, {"help", noArg, "h"}, {"version", noArg, "V"}},
	quits: []string{"h", "V"}}

// timeArgs reads GNU time (the program: bash's time keyword is a clause
// of the line): -o FILE writes FILE.
func timeArgs(args []word, _ syntax.LangVariant) (wrapped, error) {
	p := newGetopt(timeGrammar, args)
	var w wrapped
	for {
		o, ok, err := p.next()
		if err != nil {
			return wrapped{}, err
		}
		if !ok {
			break
		}
		if timeGrammar.exits(o) {
			return wrapped{own: args}, nil
		}
		if o.key == "o" {
			w.writes = append(w.writes, o.value)
		}
	}
	w.own, w.run = args[:p.i], p.rest()
	return w, nil
}

var xargsGrammar = gnu("xargs", "0a:E:e::i::I:l::L:n:prs:txP:d:o",
	longOpt{"null", noArg, "0"}, longOpt{"arg-file", reqArg, "a"}, longOpt{"delimiter", reqArg, "d"},
	longOpt{"eof", optArg, "e"}, longOpt{"replace", optArg, "I"}, longOpt{"max-lines", optArg, "l"},
	longOpt{"max-args", reqArg, "n"}, longOpt{"open-tty", noArg, "o"}, longOpt{"interactive", noArg, "p"},
	longOpt{"no-run-if-empty", noArg, "r"}, longOpt{"max-chars", reqArg, "s"}, longOpt{"verbose", noArg, "t"},
	longOpt{"show-limits", noArg, "show-limits"}, longOpt{"exit", noArg, "x"}, longOpt{"max-procs", reqArg, "P"},
	longOpt{"process-slot-var", reqArg, "process-slot-var"})

// xargsArgs reads GNU xargs. The command (echo when none is given) runs
// with words read from its input: they are an expansion after its words,
// and, with -I R / -i[R] / --replace[=R], in every word that holds R.
func xargsArgs(args []word, _ syntax.LangVariant) (wrapped, error) {
	p := newGetopt(xargsGrammar, args)
	var w wrapped
	replace := ""
	for {
		o, ok, err := p.next()
		if err != nil {
			return wrapped{}, err
		}
		if !ok {
			break
		}
		switch {
		case xargsGrammar.exits(o):
			return wrapped{own: args}, nil
		case o.key == "i" || o.key == "I":
			replace = "{}"
			if o.has {
				if !o.value.known || o.value.lit == "" {
					return wrapped{}, unsure("xargs's replace string is an expansion or empty")
				}
				replace = o.value.lit
			}
		case o.key == "process-slot-var":
			if !o.value.known {
				return wrapped{}, unsure("xargs --process-slot-var of an expansion")
			}
			w.assigns = append(w.assigns, assign{name: o.value.lit})
		}
	}
	w.own = args[:p.i]
	cmd := p.rest()
	if len(cmd) == 0 {
		cmd = []word{known("echo")}
	}
	for _, c := range cmd {
		if replace != "" && (!c.known || strings.Contains(c.lit, replace)) {
			c = word{}
		}
		w.run = append(w.run, c)
	}
	w.run = append(w.run, word{}) // what it reads
	return w, nil
}

// The builtins read their options as the shell running them does: bash's
// take clusters and no long option but --help; dash's command takes -p, -v
// and -V, and dash's exec takes no option at all (exec -a x runs -a).
var (
	bashCommand = &optGrammar{prog: "command", short: "pvV", long: []longOpt{{"help", noArg, "help"}}, quits: []string{"help", "v", "V"}}
	dashCommand = &optGrammar{prog: "command", short: "pvV", quits: []string{"v", "V"}}
	bashExec    = &optGrammar{prog: "exec", short: "cla:", long: []longOpt{{"help", noArg, "help"}}, quits: []string{"help"}}
	bashBuiltin = &optGrammar{prog: "builtin", long: []longOpt{{"help", noArg, "help"}}, quits: []string{"help"}}
)

func isBash(lang syntax.LangVariant) bool { return lang == syntax.LangBash }

// commandArgs: command -v and -V only look a name up.
func commandArgs(args []word, lang syntax.LangVariant) (wrapped, error) {
	if isBash(lang) {
		return optionsThenCommand(bashCommand)(args, lang)
	}
	return optionsThenCommand(dashCommand)(args, lang)
}

// execArgs: bash's exec -l and -a NAME set the argv[0] a program sees, and
// argv[0] decides how some behave (a name starting with "-" makes a shell
// a login shell, which reads startup files; stdbuf looks for its library
// beside it): not read here.
func execArgs(args []word, lang syntax.LangVariant) (wrapped, error) {
	if !isBash(lang) {
		return wrapped{run: args}, nil
	}
	p := newGetopt(bashExec, args)
	for {
		o, ok, err := p.next()
		if err != nil {
			return wrapped{}, err
		}
		if !ok {
			break
		}
		switch {
		case bashExec.exits(o):
			return wrapped{own: args}, nil
		case o.key == "l" || o.key == "a":
			return wrapped{}, unsure("exec -%s sets the argv[0] a program sees (a login shell, for one)", o.key)
		}
	}
	return wrapped{own: args[:p.i], run: p.rest()}, nil
}

// builtinArgs: bash's builtin runs the builtin it names; to dash it is a
// program like any other.
func builtinArgs(args []word, lang syntax.LangVariant) (wrapped, error) {
	if !isBash(lang) {
		return wrapped{}, unsure("builtin is bash's; this shell runs a program of that name")
	}
	return optionsThenCommand(bashBuiltin)(args, lang)
}
