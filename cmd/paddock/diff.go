package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/paddock-dev/paddock"
	"github.com/spf13/cobra"
)

func (a *app) diffCmd() *cobra.Command {
	var stat, patch, asJSON bool
	cmd := &cobra.Command{
		Use:   "diff RUN [--stat | --patch] [--json]",
		Short: "Show a run's change set against its base",
		Long: `Show the run's change set, computed now from its workspace: each entry (create,
modify or delete, modes, git blob ids, size) with its risk labels, and the
unified diff, which 'git apply' accepts. Files the base's ignore rules leave
out (build output, dependencies) are listed apart. Credentials in the diff are
masked on the way out; an entry holding one is labelled secret.

The diff is streamed from the daemon, whatever its size; with --patch only
the diff is printed, ready for 'git apply'. In --json the diff is carried
when it is at most 4 MiB; a larger one is left out ("diff_omitted": true)
and --patch prints it.

Risk labels: ci_config, dependency_manifest, executable, symlink, binary,
large, git_config (.gitattributes, .gitmodules), hook_directory, agent_config,
secret, suspicious_name, submodule. Entries under .git, and symbolic links
that leave the project, are never applied.

Exit codes: 0 shown; 3 no such run; 4 the run has no workspace to compare.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			if patch {
				_, err := c.ChangeSetDiff(cmd.Context(), args[0], "", cmd.OutOrStdout())
				return err
			}
			cs, err := c.ChangeSet(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if asJSON || stat || !cs.DiffOmitted {
				return a.output(asJSON, cs, func(w io.Writer) { printChangeSet(w, cs, stat) })
			}
			// The entries, then the diff streamed: the one of this
			// change set, by its hash.
			w := cmd.OutOrStdout()
			printChangeSet(w, cs, true)
			fmt.Fprintln(w)
			_, err = c.ChangeSetDiff(cmd.Context(), args[0], cs.Hash, w)
			return err
		},
	}
	cmd.Flags().BoolVar(&stat, "stat", false, "only the entries, not the diff")
	cmd.Flags().BoolVar(&patch, "patch", false, "only the unified diff, streamed (for git apply)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.MarkFlagsMutuallyExclusive("stat", "patch")
	cmd.MarkFlagsMutuallyExclusive("json", "patch")
	return cmd
}

func printChangeSet(w io.Writer, cs *paddock.ChangeSet, stat bool) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, e := range cs.Entries {
		mode := e.NewMode
		if e.Op == paddock.OpDelete {
			mode = e.OldMode
		}
		note := strings.Join(e.Risks, ",")
		if e.Blocked != "" {
			note += " BLOCKED: " + e.Blocked
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", e.Op, mode, e.Path, e.Size, note)
	}
	tw.Flush()
	if len(cs.Ignored) > 0 {
		fmt.Fprintf(w, "ignored (not in the change set): %s\n", strings.Join(cs.Ignored, " "))
	}
	fmt.Fprintf(w, "%d entries, %s\n", len(cs.Entries), cs.Hash)
	if !stat && cs.Diff != "" {
		fmt.Fprintln(w)
		io.WriteString(w, cs.Diff)
	}
}

func (a *app) submitCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "submit RUN",
		Short: "Freeze a run's change set for approval",
		Long: `Freeze the run's change set as it is now: it is stored under its hash, and
only that hash can be approved. Later changes to the workspace are not part
of it; submit again to replace it.

Exit codes: 0 submitted; 3 no such run; 4 nothing changed, or applied already.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			cs, err := c.Submit(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return a.output(asJSON, cs, func(w io.Writer) {
				printChangeSet(w, cs, true)
				fmt.Fprintf(w, "approve with: paddock approve %s --hash %s\n", args[0], cs.Hash)
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func (a *app) approveCmd() *cobra.Command {
	var hash string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "approve RUN --hash H",
		Short: "Approve a submitted change set by its hash",
		Long: `Approve the run's submitted change set. The hash must be the submitted one, so
an approval always names exactly what was reviewed; who approved is recorded.

Exit codes: 0 approved; 2 no --hash; 3 no such run; 4 another hash, or nothing submitted.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if hash == "" {
				return usageError{"approve needs --hash (paddock submit prints it)"}
			}
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			s, err := c.Approve(cmd.Context(), args[0], hash)
			if err != nil {
				return err
			}
			return a.output(asJSON, s, func(w io.Writer) {
				fmt.Fprintf(w, "approved %s (%s) by %s\n", args[0], s.Hash, s.ApprovedBy)
			})
		},
	}
	cmd.Flags().StringVar(&hash, "hash", "", "the submitted change set's hash")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func (a *app) applyCmd() *cobra.Command {
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

func (a *app) undoCmd() *cobra.Command {
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
