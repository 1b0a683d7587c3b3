package changeset

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/confine"
)

// # Files a protected .envrc sources
//
// direnv runs a directory's .envrc when a shell enters it, once `direnv
// allow` has approved that .envrc's exact content; what the .envrc sources
// (source, ., source_env, source_up, dotenv) is run as well, and no allow
// covers it: a change to scripts/env.sh, which an allowed .envrc sources,
// runs on the user's next cd without a question. Such a file is agent
// configuration as the .envrc is: labelled agent_config, with the .envrc
// named, and never applied.
//
// The .envrc files read are those of the directories a change set's
// entries lie in and above (the base's, the project work tree's, which may
// be ignored, and the change set's own, old and new), and only while the
// policy protects them. The reading is conservative: one command a line or
// between ; && || |, a literal relative path as the argument (a $variable,
// a `command`, a glob or ~ is not followed), what the sourced file sources
// in turn is not read. Paths are compared folded, as the policy does.

// maxEnvrc bounds the .envrc read from the workspace (what the agent wrote).
const maxEnvrc = 1 << 20

// sourcedFile is a path a .envrc runs, and why it is said to.
type sourcedFile struct {
	path, why string
}

// labelSourced labels the entries a protected .envrc sources. dirs are the
// entries' directories (see entryDirs), names the base's names in them (nil:
// the base is not known).
func labelSourced(entries []paddock.ChangeEntry, root string, policy *confine.Policy, trees Trees, r *acrossReads) error {
	dirs, names := r.dirs, r.names
	if len(entries) == 0 {
		return nil
	}
	byPath := map[string]*paddock.ChangeEntry{}
	for i := range entries {
		byPath[entries[i].Path] = &entries[i]
	}
	var found []sourcedFile
	read := func(p, whose string, b []byte) {
		if policy.Match(p) == "" {
			return
		}
		found = append(found, sourcedBy(p, whose, b)...)
	}
	// The change set's own .envrc files: new from the workspace, old from
	// the base.
	for _, e := range entries {
		if confine.Fold(path.Base(e.Path)) != ".envrc" {
			continue
		}
		if e.Op != paddock.OpDelete {
			if b, err := readWorkspace(root, e.Path); err == nil {
				read(e.Path, "the change set's", b)
			}
		}
		if e.Op != paddock.OpCreate && trees.Base != nil {
			b, err := trees.Base.File(e.Path)
			switch {
			case err == nil:
				read(e.Path, "the base's", b)
			case !errors.Is(err, fs.ErrNotExist):
				return fmt.Errorf("changeset: reading the base's %s: %w", e.Path, err)
			}
		}
	}
	// The base's, in the directories of the entries: what the workspace
	// holds unchanged is the base's.
	for _, d := range dirs {
		var here []string
		if trees.Base != nil {
			for _, n := range names[d] {
				if confine.Fold(n) == ".envrc" {
					here = append(here, path.Join(d, n))
				}
			}
		} else {
			here = []string{path.Join(d, ".envrc")}
		}
		for _, p := range here {
			if byPath[p] != nil {
				continue // read above
			}
			var b []byte
			var err error
			if trees.Base != nil {
				b, err = trees.Base.File(p)
			} else {
				b, err = readWorkspace(root, p)
			}
			switch {
			case err == nil:
				read(p, "the base's", b)
			case trees.Base != nil && !errors.Is(err, fs.ErrNotExist):
				return fmt.Errorf("changeset: reading the base's %s: %w", p, err)
			}
		}
		// The project's own, tracked or not: what direnv runs on the host.
		// One it cannot read is one direnv cannot run either.
		if p := path.Join(d, ".envrc"); r.host[p] != nil {
			read(p, "the project's", r.host[p])
		}
	}
	if len(found) == 0 {
		return nil
	}
	why := map[string]string{}
	for _, s := range found {
		k := confine.FoldPath(s.path)
		if why[k] == "" {
			why[k] = s.why
		}
	}
	for i := range entries {
		e := &entries[i]
		if e.Op == paddock.OpDelete {
			continue
		}
		w := why[confine.FoldPath(e.Path)]
		if w == "" {
			continue
		}
		addRisk(e, "agent_config")
		if e.Blocked == "" {
			e.Blocked = w + ": direnv runs it on entering the directory, and `direnv allow` does not cover it: never applied"
		}
	}
	return nil
}

func readWorkspace(root, p string) ([]byte, error) {
	f, err := openRegular(root, p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, maxEnvrc))
}

// sourcedBy returns the files the .envrc at envrc (whose is whose it is:
// "the base's") runs, as paths of the project, cleaned; what lies outside
// the project is left out.
func sourcedBy(envrc, whose string, content []byte) []sourcedFile {
	dir := parentDir(envrc)
	var out []sourcedFile
	add := func(p, cmd string) {
		if p == "" || strings.HasPrefix(p, "/") {
			return
		}
		p = path.Clean(path.Join(dir, p))
		if p == "." || p == ".." || strings.HasPrefix(p, "../") {
			return
		}
		out = append(out, sourcedFile{p, "sourced by " + whose + " " + envrc + " (" + cmd + ")"})
	}
	for _, cmd := range shellCommands(string(content)) {
		words := cmd.words
		for len(words) > 0 && shellKeywords[words[0].text] && words[0].literal {
			words = words[1:]
		}
		if len(words) == 0 || !words[0].literal {
			continue
		}
		arg, argOK := "", len(words) > 1 && words[1].literal && literalPath(words[1].text)
		if argOK {
			arg = words[1].text
		}
		show := func() string {
			if len(words) > 1 {
				return words[0].text + " " + words[1].text
			}
			return words[0].text
		}
		switch words[0].text {
		case "source", ".", "source_env", "source_env_if_exists":
			if argOK {
				add(arg, show())
			}
		case "dotenv", "dotenv_if_exists":
			switch {
			case len(words) == 1:
				add(".env", show())
			case argOK:
				add(arg, show())
			}
		case "source_up", "source_up_if_exists":
			// The first of the directories above that has the file; any
			// of them may.
			name := ".envrc"
			if len(words) > 1 {
				if !argOK {
					continue
				}
				name = arg
			}
			if strings.HasPrefix(name, "/") {
				continue
			}
			for d := dir; d != ""; {
				d = parentDir(d)
				add(path.Join(relTo(dir, d), name), show())
			}
		}
	}
	return out
}

// relTo is the relative path from directory from to its ancestor to.
func relTo(from, to string) string {
	n := strings.Count(from, "/") + 1
	if to != "" {
		n -= strings.Count(to, "/") + 1
	}
	return strings.TrimSuffix(strings.Repeat("../", n), "/")
}

// shellKeywords may come before a command: `if [ -f x ]; then source x; fi`.
var shellKeywords = map[string]bool{"if": true, "then": true, "else": true, "elif": true, "do": true, "while": true,
	"until": true, "!": true, "{": true, "command": true, "builtin": true}

// literalPath reports whether a word names one path as written: nothing a
// shell would expand in it.
func literalPath(w string) bool {
	return w != "" && !strings.HasPrefix(w, "~") && !strings.ContainsAny(w, "*?[")
}

// shellWord is one word of a command; literal when no expansion is in it.
type shellWord struct {
	text    string
	literal bool
}

type shellCommand struct{ words []shellWord }

// shellCommands splits shell text into simple commands, as far as quotes,
// backslashes, comments and the operators ; & | ( ) and newlines go. A
// word holding $ or ` (outside single quotes) is not literal; nothing is
// expanded.
func shellCommands(s string) []shellCommand {
	var cmds []shellCommand
	var words []shellWord
	var b strings.Builder
	inWord, literal := false, true
	endWord := func() {
		if inWord {
			words = append(words, shellWord{b.String(), literal})
		}
		b.Reset()
		inWord, literal = false, true
	}
	endCmd := func() {
		endWord()
		if len(words) > 0 {
			cmds = append(cmds, shellCommand{words})
		}
		words = nil
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\':
			if i+1 < len(s) {
				i++
				if s[i] != '\n' { // a backslash-newline joins lines
					b.WriteByte(s[i])
					inWord = true
				}
			}
		case c == '\'':
			inWord = true
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				j = len(s) - i - 1
			}
			b.WriteString(s[i+1 : i+1+j])
			i += j + 1
		case c == '"':
			inWord = true
			for i++; i < len(s) && s[i] != '"'; i++ {
				switch {
				case s[i] == '\\' && i+1 < len(s) && strings.IndexByte("$`\"\\\n", s[i+1]) >= 0:
					i++
					if s[i] != '\n' {
						b.WriteByte(s[i])
					}
				case s[i] == '$' || s[i] == '`':
					literal = false
					b.WriteByte(s[i])
				default:
					b.WriteByte(s[i])
				}
			}
		case c == '#' && !inWord:
			for i < len(s) && s[i] != '\n' {
				i++
			}
			endCmd()
		case c == ' ' || c == '\t' || c == '\r':
			endWord()
		case c == '\n' || c == ';' || c == '&' || c == '|' || c == '(' || c == ')':
			endCmd()
		case c == '$' || c == '`':
			literal = false
			inWord = true
			b.WriteByte(c)
		default:
			inWord = true
			b.WriteByte(c)
		}
	}
	endCmd()
	return cmds
}
