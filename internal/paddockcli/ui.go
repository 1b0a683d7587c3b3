package paddockcli

import (
	"fmt"
	"html"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
)

func uiCmd(a *app) *cobra.Command {
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

The browser is $BROWSER if set, else xdg-open when a display is available;
--no-open only prints the link. The browser is handed a private page (mode
0600, under the temporary directory) that sends it on to the link, never
the link itself: a process's arguments are readable by every user of the
machine (a %s in $BROWSER is replaced by that page's path).

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
// and says what it did. The link is the operator's credential until it is
// used, and a process's arguments are readable by every user of the
// machine: the browser is given a private file (0600, in a 0700
// directory) that sends it on to the link, never the link itself.
func (a *app) openBrowser(link string) string {
	page, err := loginPage(link)
	if err != nil {
		return fmt.Sprintf("(could not hand the link to a browser: %v)", err)
	}
	url := page
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

// loginPage writes a page that sends a browser on to link into a new
// private directory, and returns its path; such pages older than ten
// minutes (their links long expired) are removed.
func loginPage(link string) (string, error) {
	if old, _ := filepath.Glob(filepath.Join(os.TempDir(), "paddock-ui-*")); len(old) > 0 {
		for _, d := range old {
			if st, err := os.Stat(d); err == nil && time.Since(st.ModTime()) > 10*time.Minute {
				os.RemoveAll(d)
			}
		}
	}
	dir, err := os.MkdirTemp("", "paddock-ui-")
	if err != nil {
		return "", err
	}
	esc := html.EscapeString(link)
	body := `<!doctype html><meta charset="utf-8"><meta name="referrer" content="no-referrer">` +
		`<meta http-equiv="refresh" content="0;url=` + esc + `"><title>paddock</title><a href="` + esc + `">Open the review page</a>` + "\n"
	p := filepath.Join(dir, "login.html")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	return p, nil
}
