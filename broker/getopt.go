package broker

import (
	"slices"
	"strings"
)

// The programs that run another (env, nice, timeout, xargs, …) read their
// own options with GNU getopt_long, and a reading of what they run is only
// as good as a reading of where their options end. getopt reads argv as
// glibc does for an optstring that starts with "+" (REQUIRE_ORDER, which
// every wrapper modelled here uses, so POSIXLY_CORRECT changes nothing):
//
//   - "--" ends the options; "-" and any word not starting with "-" is the
//     first operand, and the options end there (no permutation);
//   - a long option may be any prefix of its name that no other long
//     option shares (--split-s=… is --split-string=…); an exact name wins;
//   - a long option's required value follows "=" or is the next word
//     (whatever it looks like); an optional one only follows "=";
//   - short options cluster (-iv); a short option's required value is the
//     rest of its word (-Ssh, -uNAME) or the next word (-u NAME); an
//     optional one (xargs -i[R]) only the rest of its word.
//
// What getopt would refuse (an unknown or ambiguous option, a missing or
// unwanted value) is refused here too: the program would not run what
// follows, but a reading that guesses is not a reading.

// argKind says whether an option takes a value.
type argKind int

const (
	noArg argKind = iota
	reqArg
	optArg
)

// longOpt is one long option: its name, its value, and the key the caller
// sees (its short letter when it has one, else its name).
type longOpt struct {
	name string
	arg  argKind
	key  string
}

// optGrammar is a program's options: the short ones as a getopt optstring
// (without the "+"; "x:" takes a value, "x::" may), and the long ones.
type optGrammar struct {
	prog  string
	short string
	long  []longOpt
	// quits are the keys after which the program prints and exits,
	// running nothing (--help, --version, and a short letter for them).
	quits []string
}

// exits: after this option the program prints and exits.
func (g *optGrammar) exits(o opt) bool { return slices.Contains(g.quits, o.key) }

func (g *optGrammar) shortArg(c byte) (argKind, bool) {
	if c == ':' || c == '+' || c == '-' {
		return 0, false
	}
	i := strings.IndexByte(g.short, c)
	if i < 0 {
		return 0, false
	}
	switch {
	case strings.HasPrefix(g.short[i+1:], "::"):
		return optArg, true
	case strings.HasPrefix(g.short[i+1:], ":"):
		return reqArg, true
	}
	return noArg, true
}

// lookupLong finds the long option a word's name (before any "=") names:
// the exact name, or the one option it is a prefix of.
func (g *optGrammar) lookupLong(name string) (longOpt, error) {
	var found []longOpt
	for _, l := range g.long {
		if l.name == name {
			return l, nil
		}
		if name != "" && strings.HasPrefix(l.name, name) {
			found = append(found, l)
		}
	}
	switch len(found) {
	case 0:
		return longOpt{}, unsure("%s has no option --%s", g.prog, name)
	case 1:
		return found[0], nil
	}
	names := make([]string, len(found))
	for i, l := range found {
		names[i] = "--" + l.name
	}
	return longOpt{}, unsure("%s's option --%s is ambiguous (%s)", g.prog, name, strings.Join(names, ", "))
}

// opt is one option read: its key and its value, if it was given one.
type opt struct {
	key   string
	value word
	has   bool
}

// getopt reads a program's options from args, one at a time.
type getopt struct {
	g       *optGrammar
	args    []word
	i       int    // the next word
	cluster string // what is left of a word of short options
}

func newGetopt(g *optGrammar, args []word) *getopt {
	return &getopt{g: g, args: args}
}

// next reads the next option; ok is false when the options end (at "--",
// consumed, or at the first operand, not consumed).
func (p *getopt) next() (o opt, ok bool, err error) {
	if p.cluster != "" {
		return p.short()
	}
	if p.i >= len(p.args) {
		return opt{}, false, nil
	}
	a := p.args[p.i]
	if !a.known {
		return opt{}, false, unsure("an argument of %s is an expansion (an option or the command, decided only when the shell runs)", p.g.prog)
	}
	switch {
	case a.lit == "--":
		p.i++
		return opt{}, false, nil
	case a.lit == "-" || !strings.HasPrefix(a.lit, "-"):
		return opt{}, false, nil
	case strings.HasPrefix(a.lit, "--"):
		p.i++
		name, value, eq := strings.Cut(a.lit[2:], "=")
		l, err := p.g.lookupLong(name)
		if err != nil {
			return opt{}, false, err
		}
		o := opt{key: l.key}
		switch {
		case eq && l.arg == noArg:
			return opt{}, false, unsure("%s's option --%s takes no value", p.g.prog, l.name)
		case eq:
			o.value, o.has = word{lit: value, known: true}, true
		case l.arg == reqArg:
			if p.i >= len(p.args) {
				return opt{}, false, unsure("%s's option --%s needs a value", p.g.prog, l.name)
			}
			o.value, o.has = p.args[p.i], true
			p.i++
		}
		return o, true, nil
	}
	p.cluster = a.lit[1:]
	p.i++
	return p.short()
}

// short reads one option of a cluster.
func (p *getopt) short() (opt, bool, error) {
	c := p.cluster[0]
	p.cluster = p.cluster[1:]
	kind, ok := p.g.shortArg(c)
	if !ok {
		return opt{}, false, unsure("%s has no option -%c", p.g.prog, c)
	}
	o := opt{key: string(c)}
	switch {
	case kind == noArg:
	case p.cluster != "":
		o.value, o.has = word{lit: p.cluster, known: true}, true
		p.cluster = ""
	case kind == reqArg:
		if p.i >= len(p.args) {
			return opt{}, false, unsure("%s's option -%c needs a value", p.g.prog, c)
		}
		o.value, o.has = p.args[p.i], true
		p.i++
	}
	return o, true, nil
}

// rest is what follows the options (valid once next has said they end).
func (p *getopt) rest() []word { return p.args[p.i:] }

// restart reads args from the start, as getopt does when a program sets
// optind to 0 (env -S puts the words it split in front of the rest).
func (p *getopt) restart(args []word) {
	p.args, p.i, p.cluster = args, 0, ""
}

// gnu is the grammar of a GNU program: its options and the --help and
// --version every one takes (either prints and exits).
func gnu(prog, short string, long ...longOpt) *optGrammar {
	return &optGrammar{prog: prog, short: short,
		long:  slices.Concat(long, []longOpt{{"help", noArg, "help"}, {"version", noArg, "version"}}),
		quits: []string{"help", "version"}}
}
