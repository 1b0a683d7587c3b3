package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
)

func (a *app) uiCmd() *cobra.Command {
	var noOpen, asJSON bool
	cmd := &cobra.Command{
		Use:   "ui [--no-open]",
		Short: "Open the review page in a browser",
		Long: `Print a one-time login link to the review page and open it in a browser.

The review page shows the runs and flows, each run's change set with its risk
labels, its events as they happen, and lets you approve exactly the change set
on the page, reject, apply and undo, and answer access requests.

The daemon serves the page on its loopback TCP listener (the one --listen gave
serve, or one it starts on a free port of 127.0.0.1 for this). The link works
once, within two minutes, in a browser on this machine; it logs that browser in
for twelve hours, or until the daemon stops. Anyone who can run paddock as you
can get a link; the link itself is the credential until it is used.

The browser is $BROWSER if set (a %s in it is replaced by the link), else
xdg-open when a display is available; --no-open only prints the link.

Exit codes: 0 the link is printed (and the browser asked to open it).`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			l, err := c.UILogin(cmd.Context())
			if err != nil {
				return err
			}
			opened := ""
			if !noOpen {
				opened = a.openBrowser(l.URL)
			}
			return a.output(asJSON, l, func(w io.Writer) {
				fmt.Fprintf(w, "Review page: %s\n", l.URL)
				fmt.Fprintf(w, "(the link works once, until %s)\n", l.Expires.Local().Format(time.TimeOnly))
				if opened != "" {
					fmt.Fprintln(w, opened)
				}
			})
		},
	}
	cmd.Flags().BoolVar(&noOpen, "no-open", false, "only print the link")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// openBrowser asks a browser to open url, detached from this terminal,
// and says what it did.
func (a *app) openBrowser(url string) string {
	argv := []string{}
	if b := a.getenv("BROWSER"); b != "" {
		f := strings.Fields(b)
		if !strings.Contains(b, "%s") {
			f = append(f, "%s")
		}
		for _, s := range f {
			argv = append(argv, strings.ReplaceAll(s, "%s", url))
		}
	} else if a.getenv("DISPLAY") != "" || a.getenv("WAYLAND_DISPLAY") != "" {
		if p, err := exec.LookPath("xdg-open"); err == nil {
			argv = []string{p, url}
		}
	}
	if len(argv) == 0 {
		return "(no browser here: open the link in one on this machine)"
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if null, err := os.Open(os.DevNull); err == nil {
		defer null.Close()
		cmd.Stdin, cmd.Stdout, cmd.Stderr = null, null, null
	}
	if err := cmd.Start(); err != nil {
		return fmt.Sprintf("(could not start %s: %v)", argv[0], err)
	}
	cmd.Process.Release()
	return "(asked " + argv[0] + " to open it)"
}
