package paddockcli

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/client"
	"github.com/spf13/cobra"
)

// Version is set at build time with -ldflags
// "-X github.com/paddock-dev/paddock/internal/paddockcli.Version=v1.2.3", in both
// binaries.
var Version = ""

func version() string {
	if Version != "" {
		return Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		rev, dirty := buildSetting(bi, "vcs.revision"), buildSetting(bi, "vcs.modified") == "true"
		if rev != "" {
			if len(rev) > 12 {
				rev = rev[:12]
			}
			if dirty {
				rev += "-dirty"
			}
			return "dev-" + rev
		}
		if bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			return bi.Main.Version
		}
	}
	return "dev"
}

// buildSetting is the value of a build's setting (vcs.revision, -tags…),
// "" if it has none.
func buildSetting(bi *debug.BuildInfo, key string) string {
	for _, s := range bi.Settings {
		if s.Key == key {
			return s.Value
		}
	}
	return ""
}

// cliPackage is the CLI's main package: the client verbs alone.
const cliPackage = "github.com/paddock-dev/paddock/cmd/paddock"

// cliBuild reports whether bi is the CLI's build (cmd/paddock), not
// paddockd's (cmd/paddockd).
func cliBuild(bi *debug.BuildInfo) bool {
	return bi.Path == cliPackage
}

func versionCmd(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the CLI's and the running daemon's versions",
		Long: `Print the version of this binary and, if one answers, of the daemon. It
never starts a daemon. Inside a run, the daemon is reached through the
run's own socket, which answers for the run and not with the daemon's
status: version says that the socket answers (run_socket in --json).`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			out := struct {
				Version string                `json:"version"`
				Go      string                `json:"go"`
				OS      string                `json:"os"`
				Daemon  *paddock.DaemonStatus `json:"daemon"`
				// RunSocket is the run's socket, inside a run whose
				// daemon answers there.
				RunSocket string `json:"run_socket,omitempty"`
			}{Version: version(), Go: runtime.Version(), OS: runtime.GOOS + "/" + runtime.GOARCH}
			if sock := a.runSocket(); sock != "" {
				if client.Unix(sock).WithTimeout(2*time.Second).Health(cmd.Context()) == nil {
					out.RunSocket = sock
				}
			} else {
				out.Daemon = a.daemonStatus(cmd.Context())
			}
			return a.output(asJSON, out, func(w io.Writer) {
				fmt.Fprintf(w, "paddock %s (%s, %s)\n", out.Version, out.Go, out.OS)
				switch st := out.Daemon; {
				case st != nil:
					fmt.Fprintf(w, "daemon  %s (pid %d, %s)\n", st.Version, st.PID, st.Socket)
				case out.RunSocket != "":
					fmt.Fprintf(w, "daemon  answers on this run's socket (%s)\n", out.RunSocket)
				default:
					fmt.Fprintln(w, "daemon  not running")
				}
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// daemonStatus asks the daemon on the socket for its status, without
// starting one; nil if none answers.
func (a *app) daemonStatus(ctx context.Context) *paddock.DaemonStatus {
	home, err := a.stateDir()
	if err != nil {
		return nil
	}
	// Bounded by the socket, not by ctx: a deadline's timer would start
	// the runtime's network poller, a tenth of this verb's start.
	st, err := client.Unix(socketPath(home)).WithTimeout(2 * time.Second).Status(ctx)
	if err != nil {
		return nil
	}
	return st
}
