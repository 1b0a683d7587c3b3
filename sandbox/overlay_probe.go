//go:build linux

package sandbox

import (
	"context"
	"os"
	"path/filepath"

	"github.com/paddock-dev/paddock"
)

// OverlayProbePrefix begins the name of ProbeOverlay's directory.
const OverlayProbePrefix = ".paddock-overlay-probe-"

// ProbeOverlay mounts a small overlay workspace in a sandbox for real and
// runs true in it, as uid (0: this process's own): whether this machine
// can make overlay workspaces, and if not, why (code unsupported). Its
// layers are made in parent ("": the temporary directory), which should
// be where the workspaces' are: whether overlayfs takes an upper layer
// depends on the file system under it (not overlayfs itself, as a
// container's root is, nor tmpfs without user xattrs on old kernels).
func ProbeOverlay(ctx context.Context, parent string, uid int) error {
	if parent != "" {
		if err := os.MkdirAll(parent, 0o700); err != nil {
			return err
		}
	}
	dir, err := os.MkdirTemp(parent, OverlayProbePrefix)
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755)
	ov := &Overlay{Lower: filepath.Join(dir, "lower"), Upper: filepath.Join(dir, "ws", "upper"), Work: filepath.Join(dir, "ws", "work")}
	for _, d := range []string{ov.Lower, ov.Upper, ov.Work} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if uid != 0 {
		for _, d := range []string{dir, filepath.Join(dir, "ws"), ov.Lower, ov.Upper, ov.Work} {
			if err := os.Lchown(d, uid, uid); err != nil {
				return err
			}
		}
	}
	res, err := Run(ctx, Spec{Argv: []string{"true"}, Workspace: filepath.Join(dir, "ws"), Overlay: ov,
		UID: uid, GID: uid, Env: []string{"PATH=/usr/bin:/bin"}})
	if err == nil && res.ExitCode != 0 {
		err = paddock.Errorf(paddock.CodeUnsupported, "a command in an overlay workspace exited %d", res.ExitCode)
	}
	return err
}
