package paddockcli

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/client"
	"github.com/paddock-dev/paddock/termsafe"
	"github.com/spf13/cobra"
)

// picked is one file a pick took, and from where.
type picked struct {
	Path string           `json:"path"`
	From string           `json:"from"`
	Op   paddock.ChangeOp `json:"op"`
	Blob string           `json:"blob,omitempty"`
}

func pickCmd(a *app) *cobra.Command {
	var into, kind string
	var asJSON, withSecrets bool
	cmd := &cobra.Command{
		Use:   "pick RUN[:PATH]… [--into RUN] [--json]",
		Short: "Take files from several sibling runs into one run",
		Long: `Take what sibling runs (runs at one base: the forks of a run, say) made of
some files into one run: a new run at their base, or --into an existing one
at the same base. Each argument is RUN:PATH (that file as RUN left it:
written, or deleted), RUN:DIR/ (every file RUN changed under DIR), or RUN
alone (every file it changed). Later arguments win where two name a path.

  paddock fork RUN -n 3                       three tries at the same task
  paddock compare R1 R2 R3                    where they differ
  paddock pick R1:api/ R3:cmd/main.go         the best parts, in a new run

The runs must be of one project, at one base. The files are written
through the working tools (the project's protections hold), each checked
afterwards to hold exactly the bytes the source has; a failed pick rejects
the new run it made. A file labelled secret cannot be copied exactly and
is refused, as are symbolic links. A run that declares secrets may hold
one in a form no label catches, so it is picked from only with
--with-secrets, which gives the new run those secrets too (masked wherever
paddock shows its files); --into a run that does not declare them is
refused. The new run is then reviewed, submitted and approved as any other.

Exit codes: 0 picked (the run's id is printed, alone, on stdout; each
file taken, and from where, on stderr); 2 bad arguments (a path a
file in one run and a directory in another); 3 no such run or path in a
run's change set; 4 runs of other projects or bases, or a file that could
not be written or copied exactly; 6 a run with secrets, without
--with-secrets; 7 a link or a file labelled secret.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageError{"usage: " + cmd.UseLine()}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			target, took, err := a.pick(cmd.Context(), c, args, into, kind, withSecrets)
			if err != nil {
				return err
			}
			out := map[string]any{"run": target, "picked": took}
			return a.output(asJSON, out, func(w io.Writer) {
				// stdout is the run's id alone, for RUN=$(paddock pick …);
				// what was taken is for the person, on stderr.
				for _, p := range took {
					fmt.Fprintf(a.stderr, "%-6s %s  (from %s)\n", p.Op, termsafe.Field(p.Path), p.From)
				}
				fmt.Fprintln(w, target)
			})
		},
	}
	cmd.Flags().StringVar(&into, "into", "", "an existing run (at the same base) to write into, rather than a new one")
	cmd.Flags().StringVar(&kind, "kind", "", "the new run's workspace kind")
	cmd.Flags().BoolVar(&withSecrets, "with-secrets", false, "pick from runs that declare secrets, giving the new run those secrets too")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// pick does what pickCmd says and returns the target run and what it took.
func (a *app) pick(ctx context.Context, c *client.Client, args []string, into, kind string, withSecrets bool) (target string, took []picked, err error) {
	sel, err := selectPicks(ctx, c, args, withSecrets)
	if err != nil {
		return "", nil, err
	}
	target = into
	if target == "" {
		r, err := c.Create(ctx, paddock.CreateRunRequest{Project: sel.project, Base: sel.base, Kind: kind, Secrets: sel.secrets})
		if err != nil {
			return "", nil, err
		}
		target = r.ID
		defer func() {
			if err != nil {
				if _, rerr := c.Reject(context.WithoutCancel(ctx), target); rerr == nil {
					err = fmt.Errorf("%w (the run it made, %s, is rejected)", err, target)
				}
			}
		}()
	} else if err := sel.checkInto(ctx, c, into); err != nil {
		return "", nil, err
	}
	if took, err = sel.copyInto(ctx, c, target); err != nil {
		return "", nil, err
	}
	if err := checkPicked(ctx, c, target, took); err != nil {
		return "", nil, err
	}
	return target, took, nil
}

// pickSelection is what a pick's arguments select: the files, each from
// the last run that names it, of sibling runs.
type pickSelection struct {
	sets          map[string]*paddock.ChangeSet // each run's change set
	project, base string
	secrets       []string // the runs' declared secrets
	chosen        map[string]picked
	order         []string // chosen's paths, in the order first named
}

// selectPicks reads the runs args name (RUN or RUN:PATH, PATH a file or a
// directory/) and selects their changed files: copied exactly, of sibling
// runs (one project, one base), from runs with secrets only withSecrets.
func selectPicks(ctx context.Context, c *client.Client, args []string, withSecrets bool) (*pickSelection, error) {
	s := &pickSelection{sets: map[string]*paddock.ChangeSet{}, chosen: map[string]picked{}}
	for _, arg := range args {
		id, sel, _ := strings.Cut(arg, ":")
		cs, ok := s.sets[id]
		if !ok {
			var err error
			if cs, err = s.addRun(ctx, c, id, withSecrets); err != nil {
				return nil, err
			}
		}
		n := 0
		for _, e := range cs.Entries {
			if sel != "" && e.Path != sel && !(strings.HasSuffix(sel, "/") && strings.HasPrefix(e.Path, sel)) {
				continue
			}
			switch {
			case slices.Contains(e.Risks, "secret"):
				return nil, paddock.Errorf(paddock.CodeUnsupported, "%s in run %s holds a declared secret's value: it cannot be copied exactly", e.Path, id)
			case e.NewMode == "120000" || e.NewMode == "160000" || e.Blocked != "":
				return nil, paddock.Errorf(paddock.CodeUnsupported, "%s in run %s is a link, a submodule or never applied: pick copies files only", e.Path, id)
			}
			if _, seen := s.chosen[e.Path]; !seen {
				s.order = append(s.order, e.Path)
			}
			s.chosen[e.Path] = picked{Path: e.Path, From: id, Op: e.Op, Blob: e.NewBlob}
			n++
		}
		if n == 0 {
			return nil, paddock.Errorf(paddock.CodeNotFound, "run %s changed nothing at %q", id, sel)
		}
	}
	// A path that is a file in one pick and a directory in another cannot
	// be both.
	for _, p := range s.order {
		for _, q := range s.order {
			if s.chosen[p].Op != paddock.OpDelete && s.chosen[q].Op != paddock.OpDelete && strings.HasPrefix(q, p+"/") {
				return nil, usageError{fmt.Sprintf("%s is a file in run %s and a directory in run %s: pick one of them", p, s.chosen[p].From, s.chosen[q].From)}
			}
		}
	}
	return s, nil
}

// addRun reads run id and its change set, a sibling of the runs read
// before it.
func (s *pickSelection) addRun(ctx context.Context, c *client.Client, id string, withSecrets bool) (*paddock.ChangeSet, error) {
	r, err := c.Run(ctx, id)
	if err != nil {
		return nil, err
	}
	cs, err := c.ChangeSet(ctx, id)
	if err != nil {
		return nil, err
	}
	if s.base != "" && cs.BaseRevision != s.base {
		return nil, paddock.Errorf(paddock.CodeConflict, "run %s is at base %.12s, the others at %.12s: only sibling runs' files can be put together", id, cs.BaseRevision, s.base)
	}
	if s.project != "" && r.Project != s.project {
		return nil, paddock.Errorf(paddock.CodeConflict, "run %s is of project %s, the others of %s: files do not cross projects", id, r.Project, s.project)
	}
	if len(r.Secrets) > 0 && !withSecrets {
		return nil, paddock.Errorf(paddock.CodeForbidden, "run %s declares secrets (%s): a file of it may hold one in a form no label catches; pick from it with --with-secrets, which gives the new run those secrets too", id, strings.Join(r.Secrets, ", "))
	}
	for _, sec := range r.Secrets {
		if !slices.Contains(s.secrets, sec) {
			s.secrets = append(s.secrets, sec)
		}
	}
	s.project, s.base, s.sets[id] = r.Project, cs.BaseRevision, cs
	return cs, nil
}

// checkInto refuses an --into run that is not a sibling of the runs
// picked from, or lacks a secret of theirs.
func (s *pickSelection) checkInto(ctx context.Context, c *client.Client, into string) error {
	tr, err := c.Run(ctx, into)
	if err != nil {
		return err
	}
	cs, err := c.ChangeSet(ctx, into)
	if err != nil {
		return err
	}
	switch {
	case tr.Project != s.project:
		return paddock.Errorf(paddock.CodeConflict, "run %s is of project %s, the runs picked from of %s", into, tr.Project, s.project)
	case cs.BaseRevision != s.base:
		return paddock.Errorf(paddock.CodeConflict, "run %s is at base %.12s, the runs picked from at %.12s", into, cs.BaseRevision, s.base)
	}
	for _, sec := range s.secrets {
		if !slices.Contains(tr.Secrets, sec) {
			return paddock.Errorf(paddock.CodeForbidden, "run %s does not declare secret %s, which a run picked from does", into, sec)
		}
	}
	return nil
}

// copyInto writes (or deletes) each selected file in target as its run
// left it, with its mode, through the run's tools.
func (s *pickSelection) copyInto(ctx context.Context, c *client.Client, target string) ([]picked, error) {
	var took []picked
	modes := map[string]string{}
	for _, path := range s.order {
		p := s.chosen[path]
		took = append(took, p)
		if p.Op == paddock.OpDelete {
			if _, err := c.CallTool(ctx, target, "delete", map[string]string{"path": path}); err != nil && !paddock.IsCode(err, paddock.CodeNotFound) {
				return nil, fmt.Errorf("deleting %s in %s: %w", path, target, err)
			}
			continue
		}
		content, err := readWhole(ctx, c, p.From, path)
		if err != nil {
			return nil, fmt.Errorf("reading %s in %s: %w", path, p.From, err)
		}
		for _, e := range s.sets[p.From].Entries {
			if e.Path == path {
				modes[path] = e.NewMode
			}
		}
		mode := "0644"
		if modes[path] == "100755" {
			mode = "0755"
		}
		args := map[string]string{"path": path, "content_base64": base64.StdEncoding.EncodeToString(content), "mode": mode}
		if _, err := c.CallTool(ctx, target, "write", args); err != nil {
			return nil, paddock.Errorf(paddock.CodeConflict, "writing %s in %s: %s", path, target, paddock.ErrorMessage(err))
		}
	}
	return took, nil
}

// checkPicked holds target's change set to each file as its source left
// it, byte for byte.
func checkPicked(ctx context.Context, c *client.Client, target string, took []picked) error {
	cs, err := c.ChangeSet(ctx, target)
	if err != nil {
		return err
	}
	for _, p := range took {
		ok := false
		for _, e := range cs.Entries {
			if e.Path == p.Path {
				ok = e.Op == p.Op && e.NewBlob == p.Blob
			}
		}
		if !ok {
			return paddock.Errorf(paddock.CodeConflict, "%s in run %s is not what run %s has (it was masked on the way, or changed meanwhile); pick it again or copy it another way", p.Path, target, p.From)
		}
	}
	return nil
}

// readWhole reads a file of a run through the read tool, in pieces.
func readWhole(ctx context.Context, c *client.Client, id, path string) ([]byte, error) {
	var out []byte
	for {
		off := int64(len(out))
		raw, err := c.CallTool(ctx, id, "read", map[string]any{"path": path, "byte_offset": off, "byte_limit": 4 << 20, "max_bytes": 4 << 20})
		if err != nil {
			return nil, err
		}
		var r struct {
			Size     int64  `json:"size"`
			Encoding string `json:"encoding"`
			Content  string `json:"content"`
		}
		if err := json.Unmarshal(raw, &r); err != nil {
			return nil, err
		}
		chunk := []byte(r.Content)
		if r.Encoding == "base64" {
			if chunk, err = base64.StdEncoding.DecodeString(r.Content); err != nil {
				return nil, err
			}
		}
		out = append(out, chunk...)
		if int64(len(out)) >= r.Size || len(chunk) == 0 {
			return out, nil
		}
	}
}
