package paddockcli

import (
	"fmt"
	"io"
	"os/user"
	"strconv"
	"strings"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/spf13/cobra"
)

const principalHelp = `Principals are the people and services that call paddock besides the
operator (the unix socket's own user, or the daemon's token file) and the runs'
agents (their run tokens). Each has a name, a role and, if given, the projects
the role is scoped to:

  admin         everything: projects, agents, principals, settings
  orchestrator  create, bootstrap and drive runs (tools, exec, jobs, submit,
                verify, flows) and read them; never approve, apply, grant, or
                decide on another's work
  reviewer      read everything in its projects, approve, reject, apply, undo,
                queue, grant or deny access requests
  viewer        read only

A person calls with a token over TCP (PADDOCK_ADDR and PADDOCK_TOKEN), or as a
local user mapped by uid (--user) on the unix socket; 'paddock ui' then logs the
review page in as them. A service (an orchestrator) calls with its token.
Every approval, rejection and grant records the principal that made it; an
approval policy (paddock project set --policy) can require several, never the
run's own principal.

Managing principals and tokens is an admin's (or the operator's).

Exit codes: 0 done; 2 bad input; 3 no such principal or token; 4 a name or a
uid taken already; 6 not an admin.`

func principalCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "principal add NAME --role ROLE | ls | show NAME | set NAME --role ROLE | rm NAME",
		Short: "Named people and services, their roles and projects",
		Long:  principalHelp,
	}
	cmd.AddCommand(principalAddCmd(a, "add"), principalLsCmd(a), principalShowCmd(a), principalAddCmd(a, "set"), principalRmCmd(a))
	return cmd
}

// principalAddCmd is add, or set (the whole of a principal's settings
// again, as add gives them).
func principalAddCmd(a *app, verb string) *cobra.Command {
	var (
		asJSON     bool
		role, kind string
		login      string
		uid        int
		projects   []string
		service    bool
	)
	short := "Add a principal with a role, scoped to projects if given"
	if verb == "set" {
		short = "Set a principal's role, projects and user again (its tokens stay)"
	}
	cmd := &cobra.Command{
		Use:   verb + " NAME --role admin|orchestrator|reviewer|viewer [--project P]… [--user LOGIN | --uid N] [--service]",
		Short: short,
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := paddock.PrincipalRequest{Name: args[0], Role: paddock.Role(role), Projects: projects, Kind: paddock.PrincipalPerson}
			if kind != "" {
				req.Kind = paddock.PrincipalKind(kind)
			}
			if service {
				req.Kind = paddock.PrincipalService
			}
			switch {
			case login != "" && cmd.Flags().Changed("uid"):
				return usageError{"give --user or --uid, not both"}
			case login != "":
				u, err := user.Lookup(login)
				if err != nil {
					return usageError{fmt.Sprintf("--user %s: %v", login, err)}
				}
				n, _ := strconv.Atoi(u.Uid)
				req.UID = &n
			case cmd.Flags().Changed("uid"):
				req.UID = &uid
			}
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			var p *paddock.Principal
			if verb == "set" {
				p, err = c.SetPrincipal(cmd.Context(), args[0], req)
			} else {
				p, err = c.AddPrincipal(cmd.Context(), req)
			}
			if err != nil {
				return err
			}
			return a.output(asJSON, p, func(w io.Writer) {
				fmt.Fprintf(w, "principal %s: %s\n", p.Name, describePrincipal(p))
				if verb == "add" {
					fmt.Fprintf(w, "make it a token: paddock token create %s [--expires 30d]\n", p.Name)
				}
			})
		},
	}
	cmd.Flags().StringVar(&role, "role", "", "admin, orchestrator, reviewer or viewer (required)")
	cmd.Flags().StringArrayVar(&projects, "project", nil, "scope the role to this project (repeat; none: every project)")
	cmd.Flags().StringVar(&login, "user", "", "map this local user to the principal on the unix socket")
	cmd.Flags().IntVar(&uid, "uid", 0, "map this local uid to the principal on the unix socket")
	cmd.Flags().BoolVar(&service, "service", false, "a service (an orchestrator, a bot), not a person")
	cmd.Flags().StringVar(&kind, "kind", "", "person or service (--service says service)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.MarkFlagRequired("role")
	return cmd
}

func describePrincipal(p *paddock.Principal) string {
	s := string(p.Kind) + ", " + string(p.Role)
	if len(p.Projects) > 0 {
		s += " of " + strings.Join(p.Projects, ", ")
	} else {
		s += " of every project"
	}
	if p.UID != nil {
		s += fmt.Sprintf(", local uid %d", *p.UID)
	}
	return s
}

func principalLsCmd(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List the principals",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			ps, err := c.Principals(cmd.Context())
			if err != nil {
				return err
			}
			return a.output(asJSON, nonNilList(ps), func(w io.Writer) {
				for _, p := range ps {
					fmt.Fprintf(w, "%-24s %s\n", p.Name, describePrincipal(p))
				}
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func principalShowCmd(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show NAME",
		Short: "Show a principal and its tokens",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			p, err := c.Principal(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			ts, err := c.Tokens(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			out := struct {
				*paddock.Principal
				Tokens []*paddock.Token `json:"tokens"`
			}{p, nonNilList(ts)}
			return a.output(asJSON, out, func(w io.Writer) {
				fmt.Fprintf(w, "principal %s: %s\nadded %s by %s\n", p.Name, describePrincipal(p), p.CreatedAt.Format(time.RFC3339), p.CreatedBy)
				printTokens(w, ts)
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func principalRmCmd(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "rm NAME",
		Short: "Remove a principal and its tokens (refused from its next call on)",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			p, err := c.RemovePrincipal(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return a.output(asJSON, p, func(w io.Writer) { fmt.Fprintf(w, "removed principal %s and its tokens\n", p.Name) })
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func tokenCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "token create NAME [--expires D] | ls [NAME] | revoke ID",
		Short: "Principals' bearer tokens: made, listed, revoked",
		Long: `A principal calls paddock over TCP with a bearer token:

  PADDOCK_ADDR=127.0.0.1:7878 PADDOCK_TOKEN=pdk_tok_… paddock ls

'token create' prints the token once; the daemon keeps only its hash, so a lost
token is revoked and made again, never shown. A token may expire (--expires 30d,
at most 366 days). A revoked or expired token, or one of a removed principal,
is refused at its next call on every node. 'token ls' shows when each was last
used (to the minute).

Managing tokens is an admin's (or the operator's).

Exit codes: 0 done; 2 bad input; 3 no such principal or token; 6 not an admin.`,
	}
	cmd.AddCommand(tokenCreateCmd(a), tokenLsCmd(a), tokenRevokeCmd(a))
	return cmd
}

func tokenCreateCmd(a *app) *cobra.Command {
	var (
		asJSON  bool
		expires string
	)
	cmd := &cobra.Command{
		Use:   "create NAME",
		Short: "Make a token for principal NAME, shown once",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			t, err := c.CreateToken(cmd.Context(), paddock.TokenRequest{Principal: args[0], Expires: expires})
			if err != nil {
				return err
			}
			return a.output(asJSON, t, func(w io.Writer) {
				fmt.Fprintln(w, t.Secret)
				until := "does not expire"
				if !t.ExpiresAt.IsZero() {
					until = "expires " + t.ExpiresAt.Format(time.RFC3339)
				}
				fmt.Fprintf(a.stderr, "token %s for %s (%s); it is shown only now\n", t.ID, t.Principal, until)
			})
		},
	}
	cmd.Flags().StringVar(&expires, "expires", "", "the token's life: 720h, 30d (at most 366 days; default: none)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON (with the token)")
	return cmd
}

func tokenLsCmd(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "ls [NAME]",
		Short: "List tokens (a principal's, or every one): expiry, revocation, last use",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			name := ""
			if len(args) == 1 {
				name = args[0]
			}
			ts, err := c.Tokens(cmd.Context(), name)
			if err != nil {
				return err
			}
			return a.output(asJSON, nonNilList(ts), func(w io.Writer) { printTokens(w, ts) })
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func printTokens(w io.Writer, ts []*paddock.Token) {
	stamp := func(t time.Time, none string) string {
		if t.IsZero() {
			return none
		}
		return t.Format(time.RFC3339)
	}
	for _, t := range ts {
		state := "live"
		switch {
		case !t.RevokedAt.IsZero():
			state = "revoked " + stamp(t.RevokedAt, "")
		case !t.Live(time.Now()):
			state = "expired"
		}
		fmt.Fprintf(w, "%-16s %-20s %-30s expires %-25s last used %s\n", t.ID, t.Principal, state, stamp(t.ExpiresAt, "never"), stamp(t.LastUsedAt, "never"))
	}
}

func tokenRevokeCmd(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "revoke ID",
		Short: "Revoke a token by its id (refused from its next call on)",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			t, err := c.RevokeToken(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return a.output(asJSON, t, func(w io.Writer) { fmt.Fprintf(w, "revoked token %s of %s\n", t.ID, t.Principal) })
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func whoamiCmd(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "whoami",
		Short: "Who the daemon takes you for: a principal and its role, or the operator",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			who, err := c.WhoAmI(cmd.Context())
			if err != nil {
				return err
			}
			return a.output(asJSON, who, func(w io.Writer) {
				switch {
				case who.Principal != "" && len(who.Projects) > 0:
					fmt.Fprintf(w, "%s: %s of %s\n", who.Name, who.Role, strings.Join(who.Projects, ", "))
				case who.Principal != "":
					fmt.Fprintf(w, "%s: %s of every project\n", who.Name, who.Role)
				case who.Role != "":
					fmt.Fprintf(w, "%s: the operator (every right)\n", who.Name)
				default:
					fmt.Fprintln(w, who.Name)
				}
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// nonNilList is xs, or an empty list: --json prints [] rather than null.
func nonNilList[T any](xs []T) []T {
	if xs == nil {
		return []T{}
	}
	return xs
}
