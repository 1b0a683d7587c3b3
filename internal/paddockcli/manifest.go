package paddockcli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
)

// manifestView is the part of a project's manifest the CLI prints.
type manifestView struct {
	Project  string `json:"project"`
	Revision string `json:"revision"`
	Manifest struct {
		Components []struct {
			Dir       string `json:"dir"`
			Ecosystem string `json:"ecosystem"`
			Adapter   string `json:"adapter"`
			Why       string `json:"why"`
		} `json:"components"`
	} `json:"manifest"`
	Checks []struct {
		Name    string   `json:"name"`
		Dir     string   `json:"dir"`
		Argv    []string `json:"argv"`
		Adapter string   `json:"adapter"`
		Version string   `json:"version"`
		Why     string   `json:"why"`
	} `json:"checks"`
}

func manifestCmd(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "manifest PROJECT",
		Short: "What verify runs for a project, and why",
		Long: `Show the project's capability manifest: what paddock detected at the
project's HEAD, read from git's objects (never a workspace): each component
(Go, Node with npm/pnpm/yarn/bun, Python with uv/poetry/pytest/tox, Rust,
.NET, Maven, Gradle, Makefile targets; several in a monorepo), the checks it
declares (build, test, lint, format-check) with their adapter and version,
and why. The operator's overrides ('paddock project set --check') replace
the checks they name. 'paddock verify RUN' runs these and only these.

Exit codes: 0 shown; 3 no such project.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			raw, err := c.ProjectManifest(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			var v manifestView
			if err := json.Unmarshal(raw, &v); err != nil {
				return fmt.Errorf("the daemon's manifest: %w", err)
			}
			return a.output(asJSON, raw, func(w io.Writer) {
				fmt.Fprintf(w, "project %s at %s\n", v.Project, v.Revision)
				for _, c := range v.Manifest.Components {
					fmt.Fprintf(w, "component %-12s %s (%s): %s\n", orTop(c.Dir), c.Ecosystem, c.Adapter, c.Why)
				}
				if len(v.Checks) == 0 {
					fmt.Fprintln(w, "no checks: verify has nothing to run (paddock project set --check NAME=COMMAND)")
				}
				for _, c := range v.Checks {
					ver := ""
					if c.Version != "" {
						ver = " " + c.Version
					}
					fmt.Fprintf(w, "%-12s %-12s %s   [%s%s]\n", c.Name, orTop(c.Dir), strings.Join(c.Argv, " "), c.Adapter, ver)
				}
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the manifest as JSON")
	return cmd
}

func orTop(dir string) string {
	if dir == "" {
		return "."
	}
	return dir
}
