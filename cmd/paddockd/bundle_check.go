// verify-bundle and import read a bundle's signature and key lines
// (bundle: tar, ed25519, x509's PEM): paddockd runs them, and the CLI
// hands them over (internal/paddockcli's daemonVerbs).

package main

import (
	"crypto/ed25519"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/bundle"
	"github.com/paddock-dev/paddock/internal/paddockcli"
	"github.com/spf13/cobra"
)

// trustKeys reads --key values: a key line ("ed25519 BASE64"), or a file
// of them.
func trustKeys(vals []string) ([]ed25519.PublicKey, []string, error) {
	var keys []ed25519.PublicKey
	var lines []string
	for _, v := range vals {
		src := []string{v}
		if !strings.HasPrefix(strings.TrimSpace(v), "ed25519 ") {
			b, err := os.ReadFile(v)
			if err != nil {
				return nil, nil, paddockcli.UsageError(fmt.Sprintf("--key %s: neither a key (\"ed25519 BASE64\") nor a readable file (%v)", v, err))
			}
			src = strings.Split(string(b), "\n")
		}
		for _, line := range src {
			line, _, _ = strings.Cut(line, "#") // a comment (whose key, say)
			line = strings.TrimSpace(line)
			if line == "" {
				continue
			}
			k, err := bundle.ParsePublicKey(line)
			if err != nil {
				return nil, nil, paddockcli.UsageError(fmt.Sprintf("--key %s: %s", v, paddock.ErrorMessage(err)))
			}
			keys, lines = append(keys, k), append(lines, bundle.PublicKeyLine(k))
		}
	}
	return keys, lines, nil
}

// openInput opens a file argument, or stdin for "-".
func openInput(a paddockcli.Call, name string) (io.ReadCloser, error) {
	if name == "-" {
		if a.Stdin() == nil {
			return nil, paddockcli.UsageError("no standard input to read the bundle from")
		}
		return io.NopCloser(a.Stdin()), nil
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, paddockcli.UsageError(err.Error())
	}
	return f, nil
}

func verifyBundleCmd(a paddockcli.Call) *cobra.Command {
	var keys []string
	var anySigner, asJSON, approved, verified bool
	cmd := &cobra.Command{
		Use:   "verify-bundle FILE|- (--key KEY|FILE)… [--approved] [--verified] [--any-signer] [--json]",
		Short: "Check a run bundle offline: signature, change set, blobs, approvals, events",
		Long: `Check a bundle (paddock bundle) without a daemon and without the repository:

  - every file in it is what the manifest lists, and the manifest is signed by
    a key given with --key (a line "ed25519 BASE64", or a file of such lines);
  - the change set hashes to its hash, and every file's new content to its
    git blob id;
  - the submission and the approval name that hash, and the event log is the
    run's whole log, in order, recording them;
  - and it reports the verify results recorded against that hash.

A bundle of a change set nobody approved verifies too (it is what it says):
--approved also requires the approval of its hash (and no rejection after
it), --verified a passing verify of that hash. A CI job can refuse a merge
whose bundle does not verify, or that nobody approved:

  paddock verify-bundle run.bundle --key "$(cat paddock-signer.pub)" --approved || exit 1

A bundle that fails --approved or --verified prints no report (nothing on
stdout says "verified"): stderr names each requirement it fails.

--any-signer checks everything but whose key signed it (the signer is shown,
not trusted): for looking, never for deciding.

Exit codes: 0 it verifies (and is signed by a given key, and approved or
verified if asked), 2 bad usage, 4 it does not verify, or is not approved
or verified as asked, 6 signed by a key not given.`,
		Args: paddockcli.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			trusted, _, err := trustKeys(keys)
			if err != nil {
				return err
			}
			if len(trusted) == 0 && !anySigner {
				return paddockcli.UsageError("give the signer's public key with --key (paddock bundle --public-key prints it where the bundle was made), or --any-signer to check all but the signer")
			}
			in, err := openInput(a, args[0])
			if err != nil {
				return err
			}
			defer in.Close()
			b, err := bundle.Read(in, bundle.Options{Trusted: trusted, AnySigner: anySigner})
			if err != nil {
				return err
			}
			defer b.Close()
			// What was asked beyond a whole bundle is checked before
			// anything is printed: "verified" is said only when every
			// check passed.
			if err := bundleAsAsked(b, approved, verified); err != nil {
				return err
			}
			return a.Output(asJSON, bundleReport(b), func(w io.Writer) { printBundle(w, b) })
		},
	}
	cmd.Flags().BoolVar(&approved, "approved", false, "also require the approval of the bundled change set")
	cmd.Flags().BoolVar(&verified, "verified", false, "also require a passing verify of the bundled change set")
	cmd.Flags().StringArrayVar(&keys, "key", nil, "a trusted public key, \"ed25519 BASE64\" or a file of such lines (repeatable)")
	cmd.Flags().BoolVar(&anySigner, "any-signer", false, "check everything but the signer's key")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// bundleAsAsked checks what verify-bundle's --approved and --verified ask
// of a whole bundle, and names every requirement it fails.
func bundleAsAsked(b *bundle.Bundle, approved, verified bool) error {
	var failed []string
	rule := paddock.Rule("")
	switch pol := b.Submission.Policy; {
	case !approved:
	case b.Submission.ApprovedBy == "" || b.Rejected:
		what := fmt.Sprintf("nobody approved change set %s (or the run was rejected after)", b.ChangeSet.Hash)
		if pol != nil && !pol.Met && len(b.Submission.Approvals) > 0 {
			what = fmt.Sprintf("change set %s's approvals do not meet its project's approval policy (%s)", b.ChangeSet.Hash, pol.Reason)
		}
		failed = append(failed, what)
		rule = "bundle_not_approved"
	case pol != nil && !pol.Met:
		failed = append(failed, fmt.Sprintf("change set %s's approvals do not meet its project's approval policy (%s)", b.ChangeSet.Hash, pol.Reason))
		rule = "bundle_not_approved"
	}
	if verified {
		ok := false
		var seen []string
		for _, v := range b.Verified {
			ok = ok || (v.Current && v.Passed)
			state := "failed"
			if v.Passed {
				state = "passed"
			}
			if !v.Current {
				state += " on another state of the workspace"
			}
			seen = append(seen, fmt.Sprintf("event %d %s", v.Seq, state))
		}
		if !ok {
			what := "no verify results"
			if len(seen) > 0 {
				what = "verify results: " + strings.Join(seen, ", ")
			}
			failed = append(failed, fmt.Sprintf("no verify of change set %s passed (%s)", b.ChangeSet.Hash, what))
			if rule == "" {
				rule = "bundle_not_verified"
			}
		}
	}
	if len(failed) == 0 {
		return nil
	}
	return paddock.Errorf(paddock.CodeConflict, "the bundle is whole, but %s", strings.Join(failed, "; and ")).WithRule(rule)
}

// printApprovals lists a submission's approvals, each approver with its
// role, when, and whether the project's policy gave it itself, then what
// the policy decided of them.
func printApprovals(w io.Writer, s *paddock.Submission) {
	for _, a := range s.Approvals {
		who := a.By
		switch {
		case a.Auto:
			who += " (automatic: the project's approval policy)"
		case a.Principal == "":
			who += " (the operator)"
		default:
			who += " (" + string(a.Role) + ")"
		}
		fmt.Fprintf(w, "    approval by %s at %s\n", who, a.At.Format(time.RFC3339))
	}
	if d := s.Policy; d != nil {
		state := "met"
		if !d.Met {
			state = "NOT met"
		}
		fmt.Fprintf(w, "  approval policy %s (rule %s, %d of %d): %s\n", state, d.Rule, d.Have, d.Need, d.Reason)
	}
}

// bundleReport is what verify-bundle --json prints.
func bundleReport(b *bundle.Bundle) map[string]any {
	return map[string]any{"verified": true, "trusted": b.Trusted, "approved": b.Submission.ApprovedBy != "" && !b.Rejected && (b.Submission.Policy == nil || b.Submission.Policy.Met),
		"approvals": b.Submission.Approvals, "policy": b.Submission.Policy, "rejected": b.Rejected, "signer": b.Signer, "public_key": b.PublicKey,
		"run": b.Run, "hash": b.ChangeSet.Hash, "entries": b.ChangeSet.Entries, "submission": b.Submission,
		"verified_checks": b.Verified, "events": b.Events, "created_at": b.Manifest.CreatedAt}
}

func printBundle(w io.Writer, b *bundle.Bundle) {
	signer := "trusted"
	if !b.Trusted {
		signer = "NOT checked against a trusted key (--any-signer)"
	}
	fmt.Fprintf(w, "verified: run %s of project %s, change set %s\n", b.Run.ID, b.Run.Project, b.ChangeSet.Hash)
	fmt.Fprintf(w, "  base %s, %d entries, %d events\n", b.Run.BaseRevision, len(b.ChangeSet.Entries), b.Events)
	fmt.Fprintf(w, "  signed by key %s: %s\n", b.Signer, signer)
	if s := b.Submission; s.ApprovedBy != "" {
		fmt.Fprintf(w, "  approved by %s at %s\n", s.ApprovedBy, s.ApprovedAt.Format(time.RFC3339))
	} else {
		fmt.Fprintln(w, "  not approved")
	}
	printApprovals(w, b.Submission)
	if s := b.Submission; s.AppliedTo != "" {
		fmt.Fprintf(w, "  applied to %s\n", s.AppliedTo)
	}
	for _, v := range b.Verified {
		state := "failed"
		if v.Passed {
			state = "passed"
		}
		of := "this change set"
		if !v.Current {
			of = "another state of the workspace (" + v.Hash + ")"
		}
		fmt.Fprintf(w, "  verify (event %d): %s, on %s\n", v.Seq, state, of)
	}
	if len(b.Verified) == 0 {
		fmt.Fprintln(w, "  no verify results")
	}
}

func importCmd(a paddockcli.Call) *cobra.Command {
	var keys []string
	var project, kind string
	var untrusted, asJSON bool
	cmd := &cobra.Command{
		Use:   "import FILE|- [--project P] [--kind K] [--key KEY|FILE]… [--untrusted] [--json]",
		Short: "Restore a run from a bundle, its approval still bound to the same hash",
		Long: `Restore a run from a bundle (paddock bundle) made on this or another machine:
a new run of the project (the bundle's project name unless --project) at the
bundle's base revision, which the project must have; its workspace holds
exactly the bundled change set, written through the working tools (the
project's protections hold), and it is submitted under the same hash.

The bundle is checked whole first (as verify-bundle does). Its approval comes
along, bound to that hash, only if its signer is trusted: this daemon's own
key, a key in <state>/trusted-keys/, or one given with --key. --untrusted
imports a bundle from any signer without its approval. The agent's grants and
secrets are not carried over (the run.imported event names them). Symbolic
links and submodules are not restored: such a bundle is refused.

Exit codes: 0 imported, 3 no such project, 4 the bundle does not verify or
its base is missing, 6 signed by a key not trusted, 7 what it holds cannot be
restored.`,
		Args: paddockcli.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			_, lines, err := trustKeys(keys)
			if err != nil {
				return err
			}
			in, err := openInput(a, args[0])
			if err != nil {
				return err
			}
			defer in.Close()
			c, err := a.Client(cmd.Context())
			if err != nil {
				return err
			}
			res, err := c.Import(cmd.Context(), paddock.ImportRequest{Project: project, Kind: kind, Trust: lines, Untrusted: untrusted}, in)
			if err != nil {
				return err
			}
			return a.Output(asJSON, res, func(w io.Writer) {
				fmt.Fprintf(w, "imported run %s from run %s: change set %s submitted\n", res.Run.ID, res.FromRun, res.Hash)
				switch {
				case res.Approved:
					fmt.Fprintf(w, "approved by %s (bundle signed by trusted key %s); paddock apply %s\n", res.ApprovedBy, res.Signer, res.Run.ID)
				case res.ApprovedBy != "":
					fmt.Fprintf(w, "NOT approved here: approved by %s where it was made, but key %s is not trusted; review it (paddock diff %s)\n", res.ApprovedBy, res.Signer, res.Run.ID)
				default:
					fmt.Fprintf(w, "not approved; review it (paddock diff %s)\n", res.Run.ID)
				}
			})
		},
	}
	cmd.Flags().StringVarP(&project, "project", "p", "", "the project to restore into (default: the bundle's project name)")
	cmd.Flags().StringVar(&kind, "kind", "", "the new run's workspace kind")
	cmd.Flags().StringArrayVar(&keys, "key", nil, "trust this public key for this import, \"ed25519 BASE64\" or a file of such lines (repeatable)")
	cmd.Flags().BoolVar(&untrusted, "untrusted", false, "import a bundle from an untrusted signer, without its approval")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
