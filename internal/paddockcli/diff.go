package paddockcli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/changeset/hunks"
	"github.com/paddock-dev/paddock/client"
	"github.com/paddock-dev/paddock/termsafe"
	"github.com/spf13/cobra"
)

func diffCmd(a *app) *cobra.Command {
	var stat, patch, asJSON, blame bool
	var hash string
	cmd := &cobra.Command{
		Use:   "diff RUN [--stat | --patch | --blame [--hash H]] [--json]",
		Short: "Show a run's change set against its base",
		Long: `Show the run's change set, computed now from its workspace: each entry (create,
modify or delete, modes, git blob ids, size) with its risk labels, and the
unified diff, which 'git apply' accepts. Files the base's ignore rules leave
out (build output, dependencies) are listed apart. After the entries come
the change set's hash and how to freeze exactly what was shown: 'paddock
submit RUN --expect-hash HASH', which refuses if the workspace changed since.

Masking: credentials (cloud and forge keys, tokens, private keys) and the
values of the run's declared secrets, in every form paddock knows (as is,
base64, URL, hex), are masked line by line within each file's part of the
diff; an entry whose part was masked is labelled secret. A private key's
lines are masked one by one, and never past its file or hunk. A binary file
holding a declared secret is shown as 'Binary files ... differ'. The change
set is kept, hashed and served only so: the workspace's files, which an
apply writes, keep their bytes, and 'git apply' of the diff writes the masks.

Control characters: a name or a changed line holding a character a terminal
acts on (escape sequences, CR, BS, C1 controls, bidirectional overrides such
as U+202E) is labelled control_chars. What this command prints shows such
characters escaped (\x1b, \u202e), never raw; in --json they are \u escapes.
--patch writes the diff's bytes as they are when its output is a file or a
pipe (for 'git apply'), and escaped when it is a terminal; a pager that
passes control characters through (less -r) shows them raw.

The diff is streamed from the daemon, whatever its size; with --patch only
the diff is printed. In --json the diff is carried when it is at most 4 MiB;
a larger one is left out ("diff_omitted": true) and --patch prints it.

Risk labels: ci_config, dependency_manifest, executable, symlink, binary,
large, git_config (.gitattributes, .gitmodules), hook_directory, agent_config,
runs_code (Makefile, build.rs, conftest.py, .npmrc, .aider.conf.yml, …),
agent_instructions (CLAUDE.md, AGENTS.md, .claude/commands/, .cursorrules,
…), secret, control_chars,
suspicious_name, name_collision (a path that is another of the result but
for Unicode normalisation, case or a look-alike: its note, printed beside
it, names the other), unnormalised_name (a new name not in NFC), submodule.
Entries under .git, protected agent
configuration (agent_config, under any spelling, and a file a protected
.envrc sources), symbolic links that leave
the project, and names that held a secret are never applied.

--blame shows the diff with, before each hunk, its number (what approve
--hunks takes) and the tool calls and commands that wrote its lines: their
event seq, time and what they were (paddock events RUN has the rest). A
line no recorded call explains is marked so. It is of the submitted change
set when there is one (the one approve --hunks numbers), of the workspace
now otherwise; --hash H names a submitted change set.

Exit codes: 0 shown; 3 no such run; 4 the run has no workspace to compare.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			if blame {
				return a.blame(cmd.Context(), c, args[0], hash, asJSON)
			}
			if hash != "" {
				return usageError{"--hash goes with --blame"}
			}
			if patch {
				// Raw for git apply; escaped for a person.
				if !isTerminal(a.stdout) {
					_, err := c.CopyDiff(cmd.Context(), args[0], "", a.stdout)
					return err
				}
				w := termsafe.NewWriter(a.stdout)
				if _, err := c.CopyDiff(cmd.Context(), args[0], "", w); err != nil {
					return err
				}
				return w.Flush()
			}
			cs, err := c.ChangeSet(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			hint := fmt.Sprintf("freeze exactly this: paddock submit %s --expect-hash %s\n", args[0], cs.Hash)
			if asJSON || stat || !cs.DiffOmitted {
				return a.output(asJSON, cs, func(w io.Writer) {
					printChangeSet(w, cs, true)
					io.WriteString(w, hint)
					if !stat && cs.Diff != "" {
						fmt.Fprintln(w)
						io.WriteString(w, cs.Diff)
					}
				})
			}
			// The entries, then the diff streamed: the one of this
			// change set, by its hash.
			w := termsafe.NewWriter(a.stdout)
			printChangeSet(w, cs, true)
			io.WriteString(w, hint)
			fmt.Fprintln(w)
			if _, err = c.CopyDiff(cmd.Context(), args[0], cs.Hash, w); err != nil {
				return err
			}
			return w.Flush()
		},
	}
	cmd.Flags().BoolVar(&stat, "stat", false, "only the entries, not the diff")
	cmd.Flags().BoolVar(&patch, "patch", false, "only the unified diff, streamed (for git apply; escaped on a terminal)")
	cmd.Flags().BoolVar(&blame, "blame", false, "number each hunk and name the tool calls and commands that wrote it")
	cmd.Flags().StringVar(&hash, "hash", "", "with --blame: the submitted change set with this hash")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.MarkFlagsMutuallyExclusive("stat", "patch", "blame")
	cmd.MarkFlagsMutuallyExclusive("json", "patch")
	return cmd
}

// printChangeSet prints a change set's entries, one a line, and its hash;
// with stat false, its diff too. Names are escaped for one line: a name
// cannot start a line of its own.
func printChangeSet(w io.Writer, cs *paddock.ChangeSet, stat bool) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, e := range cs.Entries {
		mode := e.NewMode
		if e.Op == paddock.OpDelete {
			mode = e.OldMode
		}
		note := strings.Join(e.Risks, ",") + riskNotes(e)
		if e.Blocked != "" {
			note += " BLOCKED: " + e.Blocked
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", e.Op, mode, termsafe.Field(e.Path), e.Size, termsafe.Field(note))
	}
	tw.Flush()
	if len(cs.Ignored) > 0 {
		ignored := make([]string, len(cs.Ignored))
		for i, p := range cs.Ignored {
			ignored[i] = termsafe.Field(p)
		}
		fmt.Fprintf(w, "ignored (not in the change set): %s\n", strings.Join(ignored, " "))
	}
	fmt.Fprintf(w, "%d entries, %s\n", len(cs.Entries), cs.Hash)
	if !stat && cs.Diff != "" {
		fmt.Fprintln(w)
		io.WriteString(w, cs.Diff)
	}
}

// riskNotes says why an entry has the labels whose reason the label alone
// does not give (the path a name collides with), in the entry's order.
func riskNotes(e paddock.ChangeEntry) string {
	var b strings.Builder
	for _, r := range e.Risks {
		if n := e.Notes[r]; n != "" {
			fmt.Fprintf(&b, " (%s: %s)", r, n)
		}
	}
	return b.String()
}

func submitCmd(a *app) *cobra.Command {
	var asJSON bool
	var expect string
	cmd := &cobra.Command{
		Use:   "submit RUN [--expect-hash H]",
		Short: "Freeze a run's change set for approval",
		Long: `Freeze the run's change set as it is now: it is stored under its hash, and
only that hash can be approved. Later changes to the workspace are not part
of it; submit again to replace it.

--expect-hash H freezes only the change set you reviewed: H is the hash
'paddock diff' printed, and if the workspace changed since (the change set
computed now has another hash) nothing is frozen and submit fails with exit
code 4; look again with 'paddock diff'. Without it, submit prints what it
froze, entry by entry, with its hash: check it is what you reviewed.

Exit codes: 0 submitted; 2 a malformed hash; 3 no such run; 4 nothing
changed, applied already, or not the expected change set.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			var cs *paddock.ChangeSet
			if expect != "" {
				cs, err = c.SubmitExpecting(cmd.Context(), args[0], expect)
			} else {
				cs, err = c.Submit(cmd.Context(), args[0])
			}
			if err != nil {
				return err
			}
			return a.output(asJSON, cs, func(w io.Writer) {
				if expect != "" {
					fmt.Fprintf(w, "froze the change set you reviewed:\n")
				} else {
					fmt.Fprintf(w, "froze the change set as it is now (compare it with what you reviewed, or submit with --expect-hash):\n")
				}
				printChangeSet(w, cs, true)
				fmt.Fprintf(w, "approve with: paddock approve %s --hash %s\n", args[0], cs.Hash)
			})
		},
	}
	cmd.Flags().StringVar(&expect, "expect-hash", "", "freeze only if the change set is still this one (the hash paddock diff printed)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func approveCmd(a *app) *cobra.Command {
	var hash, picked string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "approve RUN --hash H",
		Short: "Approve a submitted change set by its hash",
		Long: `Approve the run's submitted change set. The hash must be the submitted one, so
an approval always names exactly what was reviewed; who approved is recorded.
It may be given without its sha256: prefix. Another hash is refused without
telling the submitted one: review the change set (paddock diff RUN, which
ends with its hash) and approve what you saw.

--hunks 1,3-5 approves only those hunks, numbered as 'paddock diff RUN
--blame' numbers them (a file without hunks, binary or a mode change, is
one): the change set they make (each file as its base with the chosen hunks
made) is frozen beside the submitted one, with its own hash, which is what
is approved and what an apply or the merge queue writes. It is printed. A
new or deleted file is all or nothing. Approving the whole hash afterwards
approves the whole change set again.

The project's approval policy (paddock project show) decides who may approve
and how many approvals it takes: an approval it refuses (from someone it does
not name, or by the run's own principal) exits 6 with its rule; one that is
not yet enough is recorded, and what is still needed is printed. The same
approver approving again changes nothing.

Exit codes: 0 approved, or the approval recorded; 2 no --hash, or not a hash,
or bad hunks; 3 no such run; 4 another hash, or nothing submitted; 6 the
policy refuses this approver.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if hash == "" {
				return usageError{"approve needs --hash (paddock submit prints it)"}
			}
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			if cmd.Flags().Changed("hunks") {
				if strings.TrimSpace(picked) == "" {
					return usageError{"--hunks is empty: name the hunks to approve (1,3-5), or leave --hunks out to approve the whole change set"}
				}
				units, err := hunks.ParseUnits(picked)
				if err != nil {
					return err
				}
				s, err := c.ApproveHunks(cmd.Context(), args[0], hash, units)
				if err != nil {
					return err
				}
				if asJSON {
					return a.output(true, s, nil)
				}
				w := termsafe.NewWriter(a.stdout)
				if printPending(w, args[0], s) {
					return w.Flush()
				}
				fmt.Fprintf(w, "approved hunks %s of %s as change set %s, by %s; an apply writes only these:\n\n", picked, s.PartOf, s.Hash, s.ApprovedBy)
				if _, err := c.CopyDiff(cmd.Context(), args[0], s.Hash, w); err != nil {
					return err
				}
				return w.Flush()
			}
			s, err := c.Approve(cmd.Context(), args[0], hash)
			if err != nil {
				return err
			}
			return a.output(asJSON, s, func(w io.Writer) {
				if !printPending(w, args[0], s) {
					fmt.Fprintf(w, "approved %s (%s) by %s\n", args[0], s.Hash, s.ApprovedBy)
				}
			})
		},
	}
	cmd.Flags().StringVar(&hash, "hash", "", "the submitted change set's hash (sha256:HEX, or HEX)")
	cmd.Flags().StringVar(&picked, "hunks", "", "approve only these hunks (1,3-5; paddock diff RUN --blame numbers them)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// printPending says, when s's approvals do not meet its project's policy
// yet, that the approval was recorded and what is still needed; it
// reports whether it did.
func printPending(w io.Writer, run string, s *paddock.Submission) bool {
	d := s.Policy
	if d == nil || d.Met {
		return false
	}
	fmt.Fprintf(w, "approval of %s (%s) recorded; not approved yet: the project's approval policy wants more\n", run, s.Hash)
	fmt.Fprintf(w, "  rule %s: %s\n", d.Rule, d.Reason)
	if n := d.Need - d.Have; n > 0 {
		fmt.Fprintf(w, "  still needed: %d more approval(s) of this hash\n", n)
	}
	return true
}

func applyCmd(a *app) *cobra.Command {
	var to, author string
	var asJSON, threeWay bool
	cmd := &cobra.Command{
		Use:   "apply RUN [--to branch[=NAME]|worktree [--3way]] [--author 'Name <email>']",
		Short: "Apply an approved change set: to a new branch, or into the working tree",
		Long: `Apply the run's approved change set.

--to branch (the default): a commit whose parent is the run's base,
authored by the configured human identity (apply_name and apply_email in
paddock.toml, or --author), on a new branch (paddock/RUN unless named). It is
built with git plumbing and a temporary index: the project's working tree and
index are never touched, and the branch is created with a compare-and-swap,
so an existing branch or a concurrent writer makes apply fail cleanly. Only
the approved hash is ever applied; entries under .git, and symbolic links
that leave the project or lead into .git or to a protected path, refuse the
apply.

--to worktree: the files are written into the project's working tree, under
the project lock, all or nothing: refused if any target changed since the
base, or is reached through a symbolic link (or a file) in the working tree:
no link there is ever followed. Type changes (a link or file becoming a
directory, a directory becoming a file or link) apply as such. The new
contents are written and synced in directories that stay before anything is
renamed into place, a journal lets a restart after a crash at any point
finish the apply, and the tree it leaves is verified against the approved
one (a mismatch rolls it back). The index is not touched. 'paddock undo RUN'
reverses it exactly while the files are unchanged since.

--3way (with --to worktree): a modified file that you changed too since the
base is merged line by line (git merge-file) instead of refused, so your
lines and the approved ones both land. Changes to the same lines, binary
files, mode changes, created paths that exist and deleted files that changed
still refuse the whole apply, and nothing is written. Undo restores your
version.

Exit codes: 0 applied; 2 bad branch or no identity; 3 no such run; 4 not
approved, applied already, or the branch exists; 6 blocked entries.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var req paddock.ApplyRequest
			switch {
			case to == "worktree":
				req.To, req.ThreeWay = "worktree", threeWay
			case to == "" || to == "branch":
			case strings.HasPrefix(to, "branch="):
				req.Branch = strings.TrimPrefix(to, "branch=")
			default:
				return usageError{fmt.Sprintf("--to %q: branch[=NAME] or worktree", to)}
			}
			if threeWay && req.To != "worktree" {
				return usageError{"--3way applies only with --to worktree"}
			}
			if author != "" {
				name, email, ok := strings.Cut(author, "<")
				if !ok || !strings.HasSuffix(email, ">") {
					return usageError{"--author: want 'Name <email>'"}
				}
				req.AuthorName, req.AuthorEmail = strings.TrimSpace(name), strings.TrimSuffix(email, ">")
			}
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			s, err := c.Apply(cmd.Context(), args[0], req)
			if err != nil {
				return err
			}
			return a.output(asJSON, s, func(w io.Writer) { fmt.Fprintf(w, "applied %s to %s\n", s.Hash, s.AppliedTo) })
		},
	}
	cmd.Flags().StringVar(&to, "to", "branch", "where to apply: branch[=NAME] or worktree")
	cmd.Flags().StringVar(&author, "author", "", "author of the commit, 'Name <email>' (default: apply_name/apply_email)")
	cmd.Flags().BoolVar(&threeWay, "3way", false, "with --to worktree: merge files you changed since the base instead of refusing")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func undoCmd(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "undo RUN",
		Short: "Reverse an apply into the working tree",
		Long: `Reverse the run's apply into the project's working tree: the old contents come
back and created files go, byte for byte. Refused if any file the apply wrote
changed since.

Exit codes: 0 undone; 3 no such run; 4 nothing to undo, or a file changed since.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			s, err := c.Undo(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return a.output(asJSON, s, func(w io.Writer) { fmt.Fprintf(w, "undid the apply of %s\n", s.Hash) })
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// blame prints run id's diff with each hunk's number and origins.
func (a *app) blame(ctx context.Context, c *client.Client, id, hash string, asJSON bool) error {
	b, err := c.Blame(ctx, id, hash)
	if err != nil {
		return err
	}
	if asJSON {
		return a.output(true, b, nil)
	}
	var d bytes.Buffer
	if _, err := c.CopyDiff(ctx, id, b.Hash, &d); err != nil {
		return err
	}
	sections, err := hunks.ParseDiff(&d)
	if err != nil {
		return err
	}
	byN := map[int]paddock.HunkBlame{}
	for _, h := range b.Hunks {
		byN[h.N] = h
	}
	origin := func(n int) string {
		var parts []string
		for _, seq := range byN[n].Seqs {
			src, ok := b.Sources[seq]
			switch {
			case !ok:
				parts = append(parts, fmt.Sprintf("#%d", seq))
			case seq == 0:
				parts = append(parts, src.What)
			default:
				parts = append(parts, fmt.Sprintf("#%d %s %s", seq, src.Time.Local().Format(time.TimeOnly), src.What))
			}
		}
		if len(parts) == 0 {
			return "unknown"
		}
		return strings.Join(parts, "; ")
	}
	w := termsafe.NewWriter(a.stdout)
	fmt.Fprintf(w, "change set %s of run %s: %d hunks\n\n", b.Hash, id, len(b.Hunks))
	for _, s := range sections {
		for _, l := range s.Header {
			io.WriteString(w, l)
		}
		if len(s.Hunks) == 0 {
			fmt.Fprintf(w, "### hunk %d (the whole file) ← %s\n", s.N, origin(s.N))
		}
		for _, h := range s.Hunks {
			fmt.Fprintf(w, "### hunk %d ← %s\n", h.N, origin(h.N))
			io.WriteString(w, h.Header)
			for _, l := range h.Lines {
				io.WriteString(w, l)
			}
		}
		for _, l := range s.Rest {
			io.WriteString(w, l)
		}
	}
	return w.Flush()
}
