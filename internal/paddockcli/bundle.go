package paddockcli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
)

func bundleCmd(a *app) *cobra.Command {
	var out string
	var publicKey, asJSON bool
	cmd := &cobra.Command{
		Use:   "bundle RUN [-o FILE] | bundle --public-key",
		Short: "Write a run's submitted change set as one signed, portable file",
		Long: `Write a run's submitted change set, and what is needed to trust it on
another machine, as one file signed by this daemon's key:

  the base revision, the change set (entries, diff, the new content of every
  file), the agent's definition and its access requests, the sandbox's
  recorded enforcement, the whole event log (verify results included), the
  submission and its approval.

  paddock bundle RUN > run.bundle        or   paddock bundle RUN -o run.bundle
  paddock verify-bundle run.bundle --key KEY     checks it offline (a CI job can)
  paddock import run.bundle                      restores the run elsewhere

The key is <state>/bundle-key.pem (ed25519, made on first use; keep it as you
keep any signing key). --public-key prints its public half, one line
("ed25519 BASE64"), to give to whoever verifies or imports your bundles. A
daemon trusts its own key and the keys in <state>/trusted-keys/ (files of
such lines).

A change set that holds a declared secret's value is refused: the file would
carry it in clear. -o writes the file whole or not at all.

Exit codes: 0 written, 3 no such run, 4 nothing submitted, 6 refused (a secret).`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			if publicKey {
				if len(args) != 0 {
					return usageError{"--public-key takes no run"}
				}
				k, err := c.BundleKey(cmd.Context())
				if err != nil {
					return err
				}
				return a.output(asJSON, k, func(w io.Writer) { fmt.Fprintln(w, k.PublicKey) })
			}
			if len(args) != 1 {
				return usageError{"usage: " + cmd.UseLine()}
			}
			if out == "" || out == "-" {
				if isTerminal(a.stdout) {
					return usageError{"a bundle is a binary file: redirect it (paddock bundle RUN > run.bundle) or name it with -o FILE"}
				}
				return c.Bundle(cmd.Context(), args[0], a.stdout)
			}
			n, err := writeWhole(out, func(w io.Writer) error { return c.Bundle(cmd.Context(), args[0], w) })
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stderr, "wrote %s (%d bytes): run %s, signed by this daemon's key\n", out, n, args[0])
			return nil
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "write the bundle to FILE (whole or not at all) rather than to stdout")
	cmd.Flags().BoolVar(&publicKey, "public-key", false, "print the public key bundles are signed with")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON (with --public-key)")
	return cmd
}

// writeWhole writes path with what fill writes, through a temporary file
// renamed into place once it is whole and synced.
func writeWhole(path string, fill func(io.Writer) error) (int64, error) {
	if st, err := os.Stat(filepath.Dir(path)); err != nil || !st.IsDir() {
		return 0, usageError{fmt.Sprintf("cannot write %s: %s is not a directory", path, filepath.Dir(path))}
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return 0, fmt.Errorf("cannot write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	cw := &countWriter{w: tmp}
	err = fill(cw)
	if err == nil {
		err = tmp.Sync()
	}
	if err = errors.Join(err, tmp.Close()); err != nil {
		return 0, err
	}
	return cw.n, os.Rename(tmp.Name(), path)
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
