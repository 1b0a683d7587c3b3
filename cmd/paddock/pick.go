package main

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

func (a *app) pickCmd() *cobra.Command {
	var into, kind string
	var asJSON bool
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

The files are written through the working tools (the project's protections
hold), each checked afterwards to hold exactly the bytes the source has; a
file holding a declared secret (labelled secret) cannot be copied exactly
and is refused, as are symbolic links. The new run is then reviewed,
submitted and approved as any other.

Exit codes: 0 picked (the run's id is printed); 2 bad arguments; 3 no such
run or path in a run's change set; 4 runs at different bases, or a file
that could not be copied exactly; 7 a link or a secret.`,
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
			target, took, err := a.pick(cmd.Context(), c, args, into, kind)
			if err != nil {
				return err
			}
			out := map[string]any{"run": target, "picked": took}
			return a.output(asJSON, out, func(w io.Writer) {
				for _, p := range took {
					fmt.Fprintf(w, "%-6s %s  (from %s)\n", p.Op, termsafe.Field(p.Path), p.From)
				}
				fmt.Fprintln(w, target)
			})
		},
	}
	cmd.Flags().StringVar(&into, "into", "", "an existing run (at the same base) to write into, rather than a new one")
	cmd.Flags().StringVar(&kind, "kind", "", "the new run's workspace kind")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// pick does what pickCmd says and returns the target run and what it took.
func (a *app) pick(ctx context.Context, c *client.Client, args []string, into, kind string) (string, []picked, error) {
	sets := map[string]*paddock.ChangeSet{}
	var project, base string
	chosen := map[string]picked{}
	var order []string
	for _, arg := range args {
		id, sel, _ := strings.Cut(arg, ":")
		cs, ok := sets[id]
		if !ok {
			r, err := c.Run(ctx, id)
			if err != nil {
				return "", nil, err
			}
			if cs, err = c.ChangeSet(ctx, id); err != nil {
				return "", nil, err
			}
			if base != "" && cs.BaseRevision != base {
				return "", nil, paddock.Errorf(paddock.CodeConflict, "run %s is at base %.12s, the others at %.12s: only sibling runs' files can be put together", id, cs.BaseRevision, base)
			}
			project, base, sets[id] = r.Project, cs.BaseRevision, cs
		}
		n := 0
		for _, e := range cs.Entries {
			if sel != "" && e.Path != sel && !(strings.HasSuffix(sel, "/") && strings.HasPrefix(e.Path, sel)) {
				continue
			}
			switch {
			case slices.Contains(e.Risks, "secret"):
				return "", nil, paddock.Errorf(paddock.CodeUnsupported, "%s in run %s holds a declared secret's value: it cannot be copied exactly", e.Path, id)
			case e.NewMode == "120000" || e.NewMode == "160000" || e.Blocked != "":
				return "", nil, paddock.Errorf(paddock.CodeUnsupported, "%s in run %s is a link, a submodule or never applied: pick copies files only", e.Path, id)
			}
			if _, seen := chosen[e.Path]; !seen {
				order = append(order, e.Path)
			}
			chosen[e.Path] = picked{Path: e.Path, From: id, Op: e.Op, Blob: e.NewBlob}
			n++
		}
		if n == 0 {
			return "", nil, paddock.Errorf(paddock.CodeNotFound, "run %s changed nothing at %q", id, sel)
		}
	}
	target := into
	if target == "" {
		r, err := c.Create(ctx, paddock.CreateRunRequest{Project: project, Base: base, Kind: kind})
		if err != nil {
			return "", nil, err
		}
		target = r.ID
	} else if cs, err := c.ChangeSet(ctx, into); err != nil {
		return "", nil, err
	} else if cs.BaseRevision != base {
		return "", nil, paddock.Errorf(paddock.CodeConflict, "run %s is at base %.12s, the runs picked from at %.12s", into, cs.BaseRevision, base)
	}
	var took []picked
	modes := map[string]string{}
	for _, path := range order {
		p := chosen[path]
		took = append(took, p)
		if p.Op == paddock.OpDelete {
			if _, err := c.CallTool(ctx, target, "delete", map[string]string{"path": path}); err != nil && !paddock.IsCode(err, paddock.CodeNotFound) {
				return "", nil, fmt.Errorf("deleting %s in %s: %w", path, target, err)
			}
			continue
		}
		content, err := readWhole(ctx, c, p.From, path)
		if err != nil {
			return "", nil, fmt.Errorf("reading %s in %s: %w", path, p.From, err)
		}
		for _, e := range sets[p.From].Entries {
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
			return "", nil, fmt.Errorf("writing %s in %s: %w", path, target, err)
		}
	}
	// Each file as its source left it, byte for byte.
	cs, err := c.ChangeSet(ctx, target)
	if err != nil {
		return "", nil, err
	}
	for _, p := range took {
		ok := false
		for _, e := range cs.Entries {
			if e.Path == p.Path {
				ok = e.Op == p.Op && e.NewBlob == p.Blob
			}
		}
		if !ok {
			return "", nil, paddock.Errorf(paddock.CodeConflict, "%s in run %s is not what run %s has (it was masked on the way, or changed meanwhile); pick it again or copy it another way", p.Path, target, p.From)
		}
	}
	return target, took, nil
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
