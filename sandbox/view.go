//go:build linux

package sandbox

// The view: the file system a command sees, built in the helper's new
// mount namespace and made its root.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// systemDirs are mounted read-only at their own paths when they exist.
var systemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32", "/etc"}

// devNodes are bound from the host into the minimal /dev.
var devNodes = []string{"null", "zero", "full", "random", "urandom"}

// buildView makes the command's view of the file system (and its network)
// in the process's new namespaces, and makes it the process's root.
//
// persistentView says the view is a harness's, from which each command is
// forked into a mount namespace of its own (and mounts its own scratch
// layer there), rather than the one command's.
func buildView(spec *Spec, e *Enforcement, persistentView bool) error {
	recordView(spec, e)
	wsfd, err := openByPath(spec)
	if err != nil {
		return err
	}
	defer unix.Close(wsfd)

	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	proxyfd, err := openProxy(spec, e)
	if err != nil {
		return err
	}
	if proxyfd >= 0 {
		defer unix.Close(proxyfd)
	}
	root, err := stageRoot(spec)
	if err != nil {
		return err
	}
	if err := mountWorkspace(spec, e, root, wsfd, persistentView); err != nil {
		return err
	}
	if err := mountBinds(spec, root); err != nil {
		return err
	}
	// Whatever else came from the daemon's namespace (see mountWorkspace).
	if err := unix.Mount("", root, "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make the view's mounts private: %w", err)
	}
	if proxyfd >= 0 {
		if err := mountProxySocket(root, proxyfd); err != nil {
			return err
		}
	}
	if err := mountDevProc(root); err != nil {
		return err
	}

	// The bridge to the proxy is its own process: the helper is about to
	// become the command. Started before pivot_root, it follows the new root.
	switch spec.Net {
	case NetAllow:
		if err := startBridge(); err != nil {
			return err
		}
	case NetNone:
		// The namespace's own loopback, and nothing else: a test's local
		// server works, and nothing outside is reachable.
		if err := loopbackUp(); err != nil {
			return err
		}
	}
	return pivot(root)
}

// recordView notes in e what the view is about to enforce that the Spec
// alone decides.
func recordView(spec *Spec, e *Enforcement) {
	e.Namespaces = []string{"user", "mount", "pid", "ipc", "uts"}
	e.Net = string(spec.Net)
	if spec.Net != NetHost {
		e.Namespaces = append(e.Namespaces, "net")
	}
	e.UID = os.Getuid()
	e.ReadOnly = spec.ReadOnly
	e.Limits = spec.Limits
	e.ProcsScope = ProcsPerUID
	if spec.ProcsCgroup {
		e.ProcsScope = ProcsPerCommand
	}
}

// openByPath returns the workspace's descriptor. The host opened the
// workspace: the command's uid may not be able to walk the path to it (a
// root daemon's state directory is 0700), and a tmpfs is about to be
// mounted over /tmp, where it may live. For an unprivileged daemon
// (Spec.OpenByPath) the host's descriptors are replaced by ones opened
// here, by path, in this mount namespace: the overlay's layers, the binds'
// sources and the workspace.
func openByPath(spec *Spec) (wsfd int, err error) {
	wsfd = fdWorkspace
	if spec.OpenByPath && spec.Overlay != nil {
		// The layers, by path in this mount namespace (overlayfs takes only
		// layers mounted here), before a tmpfs covers /tmp where they may be.
		for fd, dir := range map[int]string{fdLower: spec.Overlay.Lower, fdUpperWork: filepath.Dir(spec.Overlay.Upper)} {
			nfd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
			if err != nil {
				return -1, fmt.Errorf("open an overlay layer: %w", err)
			}
			if err := unix.Dup3(nfd, fd, unix.O_CLOEXEC); err != nil {
				return -1, err
			}
			unix.Close(nfd)
		}
		for j, dir := range spec.Overlay.Frozen {
			nfd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
			if err != nil {
				return -1, fmt.Errorf("open a frozen overlay layer: %w", err)
			}
			if err := unix.Dup3(nfd, fdFrozen(spec, j), unix.O_CLOEXEC); err != nil {
				return -1, err
			}
			unix.Close(nfd)
		}
	}
	if spec.OpenByPath {
		// The binds' sources (and their layers'), by path in this mount
		// namespace, likewise.
		reopen := func(path string, flags, fd int) error {
			nfd, err := unix.Open(path, unix.O_PATH|flags|unix.O_CLOEXEC, 0)
			if err != nil {
				return fmt.Errorf("open %s: %w", path, err)
			}
			defer unix.Close(nfd)
			return unix.Dup3(nfd, fd, unix.O_CLOEXEC)
		}
		for i, b := range spec.Binds {
			if err := reopen(b.Source, bindOpenFlags(b), fdBinds+i); err != nil {
				return -1, err
			}
			if b.Upper != "" && !b.Throwaway {
				if err := reopen(b.Upper, unix.O_DIRECTORY, fdBindUpper(spec, i)); err != nil {
					return -1, err
				}
			}
		}
	}
	if spec.OpenByPath && spec.Overlay == nil {
		unix.Close(fdWorkspace)
		if wsfd, err = unix.Open(spec.Workspace, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err != nil {
			return -1, fmt.Errorf("open workspace: %w", err)
		}
	}
	return wsfd, nil
}

// openProxy opens the proxy's socket of an "allow" network before /tmp
// (where it lives) is covered, and notes what it allows in e; -1 for any
// other network.
func openProxy(spec *Spec, e *Enforcement) (int, error) {
	if spec.Net != NetAllow {
		return -1, nil
	}
	proxyfd, err := unix.Open(spec.ProxySocket, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open the proxy socket: %w", err)
	}
	e.Allow = spec.Allow
	for _, a := range spec.AllowAddrs {
		e.AllowAddrs = append(e.AllowAddrs, a.String())
	}
	return proxyfd, nil
}

// stageRoot makes the new root in a tmpfs over /tmp (only in this mount
// namespace), with the system directories read-only and a private /tmp,
// and returns its path.
func stageRoot(spec *Spec) (string, error) {
	if err := unix.Mount("paddock", "/tmp", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size=16m,mode=0755"); err != nil {
		return "", fmt.Errorf("stage root: %w", err)
	}
	root := "/tmp/root"
	if err := os.Mkdir(root, 0o755); err != nil {
		return "", err
	}
	if err := unix.Mount(root, root, "", unix.MS_BIND, ""); err != nil {
		return "", fmt.Errorf("stage root: %w", err)
	}
	for _, d := range systemDirs {
		fi, err := os.Lstat(d)
		if err != nil {
			continue
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			target, err := os.Readlink(d)
			if err != nil {
				return "", err
			}
			if err := os.Symlink(target, root+d); err != nil {
				return "", err
			}
			continue
		}
		if err := bindRO(d, root+d, true); err != nil {
			return "", err
		}
	}
	// A private /tmp first: a workspace under /tmp is mounted inside it.
	if err := os.Mkdir(root+"/tmp", 0o1777); err != nil {
		return "", err
	}
	if err := unix.Mount("tmp", root+"/tmp", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV,
		fmt.Sprintf("size=%d,mode=1777", spec.Limits.Tmp)); err != nil {
		return "", fmt.Errorf("mount /tmp: %w", err)
	}
	return root, nil
}

// mountWorkspace mounts the workspace (wsfd, or the overlay) at its own
// path in the view at root, read-only if asked, with its scratch layer
// and its protected paths.
func mountWorkspace(spec *Spec, e *Enforcement, root string, wsfd int, persistentView bool) error {
	wsTarget := root + spec.Workspace
	if err := os.MkdirAll(wsTarget, 0o755); err != nil {
		return err
	}
	var err error
	switch {
	case spec.Overlay != nil:
		if err = mountOverlay(spec, wsTarget); err == nil && spec.DaemonView {
			// The daemon's way in (/proc/PID/root/.paddock-view): a copy
			// of the overlay's mount taken before the protected paths are
			// made read-only on it, for what the daemon itself writes (the
			// staged recipes). Landlock rules follow inodes, not paths, so
			// the workspace's rule would cover it: each command unmounts it
			// in its own mount namespace before it execs (forkexec.go).
			var vfd int
			if vfd, err = unix.OpenTree(unix.AT_FDCWD, wsTarget, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC); err == nil {
				if err = os.Mkdir(root+DaemonView, 0o700); err == nil {
					err = unix.MoveMount(vfd, "", unix.AT_FDCWD, root+DaemonView, unix.MOVE_MOUNT_F_EMPTY_PATH)
				}
				unix.Close(vfd)
			}
		}
	case spec.OpenByPath:
		err = unix.Mount(fmt.Sprintf("/proc/self/fd/%d", wsfd), wsTarget, "", unix.MS_BIND|unix.MS_REC, "")
	default:
		err = unix.MoveMount(wsfd, "", unix.AT_FDCWD, wsTarget, unix.MOVE_MOUNT_F_EMPTY_PATH)
	}
	var ue unsupportedError
	if errors.As(err, &ue) {
		return err
	}
	if err != nil {
		return fmt.Errorf("mount workspace: %w", err)
	}
	// The workspace's mount came from the daemon's namespace (a clone of
	// its mount, a bind of it): where that is shared (systemd makes every
	// mount shared), the clone is the daemon's mount's peer, and every
	// mount made below it here (the protected paths, a command's scratch
	// layer) would propagate back to the daemon's namespace and to every
	// other command's. Nothing here is anyone's peer.
	if err := unix.Mount("", wsTarget, "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make the workspace's mount private: %w", err)
	}
	flags := uintptr(unix.MS_BIND | unix.MS_REMOUNT | unix.MS_NOSUID | unix.MS_NODEV)
	if spec.ReadOnly {
		flags |= unix.MS_RDONLY
	}
	if err := unix.Mount("", wsTarget, "", flags, ""); err != nil {
		return fmt.Errorf("remount workspace: %w", err)
	}
	if spec.ReadOnly && spec.Scratch {
		// Every command of a harness gets a fresh layer (forkexec.go); the
		// place for it must exist before the root turns read-only.
		if err := os.MkdirAll(root+ScratchDir, 0o755); err != nil {
			return err
		}
		if !persistentView {
			if err := mountScratch(root+ScratchDir, wsTarget, spec.Limits.Tmp); err != nil {
				return err
			}
		}
		e.Scratch = true
	}
	if e.ReadOnlyIn, e.Unprotected, err = protect(wsTarget, spec.Protected, !spec.ReadOnly && !spec.OperatorDir, !spec.ReadOnly); err != nil {
		return err
	}
	e.Unprotected = append(e.Unprotected, spec.Unprotected...)
	return nil
}

// mountProxySocket shows the proxy's socket (proxyfd) at its place in
// the view at root.
func mountProxySocket(root string, proxyfd int) error {
	os.MkdirAll(root+"/run/paddock", 0o755)
	f, err := os.Create(root + proxySocketInside)
	if err != nil {
		return err
	}
	f.Close()
	if err := unix.Mount(fmt.Sprintf("/proc/self/fd/%d", proxyfd), root+proxySocketInside, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("mount the proxy socket: %w", err)
	}
	return nil
}

// mountDevProc mounts a minimal /dev, and /proc of the new pid namespace,
// in the view at root.
func mountDevProc(root string) error {
	if err := os.Mkdir(root+"/dev", 0o755); err != nil {
		return err
	}
	if err := unix.Mount("dev", root+"/dev", "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "size=64k,mode=0755"); err != nil {
		return fmt.Errorf("mount /dev: %w", err)
	}
	for _, n := range devNodes {
		f, err := os.Create(root + "/dev/" + n)
		if err != nil {
			return err
		}
		f.Close()
		if err := unix.Mount("/dev/"+n, root+"/dev/"+n, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("mount /dev/%s: %w", n, err)
		}
	}
	// /dev/tty, which opens the command's controlling terminal (a
	// command given a terminal has one), where the host has the node.
	if fi, err := os.Stat("/dev/tty"); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
		f, err := os.Create(root + "/dev/tty")
		if err != nil {
			return err
		}
		f.Close()
		if err := unix.Mount("/dev/tty", root+"/dev/tty", "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("mount /dev/tty: %w", err)
		}
	}
	for name, target := range map[string]string{"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2"} {
		os.Symlink(target, root+"/dev/"+name)
	}
	if err := unix.Mount("", root+"/dev", "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("remount /dev: %w", err)
	}
	if err := os.Mkdir(root+"/proc", 0o555); err != nil {
		return err
	}
	if err := unix.Mount("proc", root+"/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return unsupportedError{fmt.Sprintf("cannot mount /proc for the new pid namespace (%v); a container or an LSM hides /proc", err)}
	}
	return nil
}

// pivot makes the view at root the process's root, drops the old one
// and turns the new one read-only.
func pivot(root string) error {
	if err := os.Mkdir(root+"/.old", 0o700); err != nil {
		return err
	}
	if err := unix.PivotRoot(root, root+"/.old"); err != nil {
		return fmt.Errorf("pivot_root: %w", err)
	}
	if err := unix.Chdir("/"); err != nil {
		return err
	}
	if err := unix.Unmount("/.old", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("drop the old root: %w", err)
	}
	os.Remove("/.old")
	if err := unix.Mount("", "/", "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
		return fmt.Errorf("remount / read-only: %w", err)
	}
	unix.Sethostname([]byte("paddock"))
	return nil
}

// mountOverlay mounts the copy-on-write view at target; it exists in this
// mount namespace only. overlayfs takes layers mounted in the mounter's
// namespace: the host's detached copies are attached under /tmp/layers
// first (the staging tmpfs, dropped with the old root once the overlay
// holds its own references), or, for an unprivileged daemon, opened by path.
func mountOverlay(spec *Spec, target string) error {
	lower, rw := fmt.Sprintf("/proc/self/fd/%d", fdLower), fmt.Sprintf("/proc/self/fd/%d", fdUpperWork)
	if !spec.OpenByPath {
		lower, rw = "/tmp/layers/lower", "/tmp/layers/rw"
		for fd, dir := range map[int]string{fdLower: lower, fdUpperWork: rw} {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			if err := unix.MoveMount(fd, "", unix.AT_FDCWD, dir, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
				return fmt.Errorf("attach an overlay layer: %w", err)
			}
		}
	}
	defer unix.Close(fdLower)
	defer unix.Close(fdUpperWork)
	// The frozen layers stacked above the lower one, topmost first (a
	// forked run's): attached or opened as it is.
	lowers := make([]string, 0, len(spec.Overlay.Frozen)+1)
	for j := range spec.Overlay.Frozen {
		fd := fdFrozen(spec, j)
		dir := fmt.Sprintf("/proc/self/fd/%d", fd)
		if !spec.OpenByPath {
			dir = fmt.Sprintf("/tmp/layers/f%d", j)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			if err := unix.MoveMount(fd, "", unix.AT_FDCWD, dir, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
				return fmt.Errorf("attach a frozen overlay layer: %w", err)
			}
		}
		defer unix.Close(fd)
		lowers = append(lowers, dir)
	}
	lower = strings.Join(append(lowers, lower), ":")
	// userxattr: in a user namespace overlayfs keeps its marks (opaque
	// directories) in user.* attributes.
	opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s,userxattr", lower,
		filepath.Join(rw, filepath.Base(spec.Overlay.Upper)), filepath.Join(rw, filepath.Base(spec.Overlay.Work)))
	if err := unix.Mount("paddock-overlay", target, "overlay", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return unsupportedError{fmt.Sprintf("cannot mount the overlay workspace in a user namespace (%v); use kind clone", err)}
	}
	return nil
}

// mountScratch puts a writable layer that lives in a tmpfs of size bytes
// at dir over the read-only workspace at ws.
func mountScratch(dir, ws string, size int64) error {
	if err := unix.Mount("scratch", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, fmt.Sprintf("size=%d,mode=0755", size)); err != nil {
		return fmt.Errorf("scratch layer: %w", err)
	}
	for _, d := range []string{"u", "w"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			return err
		}
	}
	if err := unix.Mount("paddock-scratch", ws, "overlay", unix.MS_NOSUID|unix.MS_NODEV, scratchOptions(dir, ws)); err != nil {
		return fmt.Errorf("scratch layer: %w", err)
	}
	return nil
}

func scratchOptions(dir, ws string) string {
	return fmt.Sprintf("lowerdir=%s,upperdir=%s/u,workdir=%s/w,userxattr", ws, dir, dir)
}

// mountBinds shows each bind's source at its target in the view being
// built at root, read-only where asked.
func mountBinds(spec *Spec, root string) error {
	for i, b := range spec.Binds {
		fd := fdBinds + i
		target := root + b.Target
		if err := bindTarget(target, b.File); err != nil {
			return fmt.Errorf("bind %s: %w", b.Target, err)
		}
		if b.Upper != "" {
			if err := mountLayer(spec, i, target); err != nil {
				return err
			}
			continue
		}
		var err error
		if spec.OpenByPath {
			err = unix.Mount(fmt.Sprintf("/proc/self/fd/%d", fd), target, "", unix.MS_BIND|unix.MS_REC, "")
		} else {
			err = unix.MoveMount(fd, "", unix.AT_FDCWD, target, unix.MOVE_MOUNT_F_EMPTY_PATH)
		}
		unix.Close(fd)
		if err != nil {
			return fmt.Errorf("bind %s: %w", b.Target, err)
		}
		// Before anything is mounted on or below it: see mountWorkspace.
		if err := unix.Mount("", target, "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			return fmt.Errorf("make %s's mount private: %w", b.Target, err)
		}
		flags := uintptr(unix.MS_BIND | unix.MS_REMOUNT | unix.MS_NOSUID | unix.MS_NODEV)
		if b.ReadOnly {
			flags |= unix.MS_RDONLY
		}
		if err := unix.Mount("", target, "", flags|lockedFlags(target), ""); err != nil {
			return fmt.Errorf("remount %s: %w", b.Target, err)
		}
	}
	return nil
}

// mountLayer mounts bind i, a copy-on-write layer, at target: an overlay
// of its source (read-only below) and its upper directory, or for a
// Throwaway layer an upper in a tmpfs of its own, which ends with the
// view. Like the workspace's overlay, its layers are attached under
// /tmp/layers first, or opened by path.
func mountLayer(spec *Spec, i int, target string) error {
	b := spec.Binds[i]
	srcfd, upfd := fdBinds+i, fdBindUpper(spec, i)
	defer unix.Close(srcfd)
	defer unix.Close(upfd)
	stage := fmt.Sprintf("/tmp/layers/b%d", i)
	lower, rw := fmt.Sprintf("/proc/self/fd/%d", srcfd), fmt.Sprintf("/proc/self/fd/%d", upfd)
	attach := func(fd int, dir string) error {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		if err := unix.MoveMount(fd, "", unix.AT_FDCWD, dir, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
			return fmt.Errorf("bind %s: attach a layer: %w", b.Target, err)
		}
		return nil
	}
	if !spec.OpenByPath {
		lower = stage + "/lower"
		if err := attach(srcfd, lower); err != nil {
			return err
		}
	}
	switch {
	case b.Throwaway:
		rw = stage + "/rw"
		if err := os.MkdirAll(rw, 0o755); err != nil {
			return err
		}
		if err := unix.Mount("layer", rw, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, fmt.Sprintf("size=%d,mode=0755", spec.Limits.Tmp)); err != nil {
			return fmt.Errorf("bind %s: a layer in memory: %w", b.Target, err)
		}
		for _, d := range []string{"upper", "work"} {
			if err := os.Mkdir(filepath.Join(rw, d), 0o755); err != nil {
				return err
			}
		}
	case !spec.OpenByPath:
		rw = stage + "/rw"
		if err := attach(upfd, rw); err != nil {
			return err
		}
	}
	opts := fmt.Sprintf("lowerdir=%s,upperdir=%s/upper,workdir=%s/work,userxattr", lower, rw, rw)
	if err := unix.Mount("paddock-layer", target, "overlay", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return unsupportedError{fmt.Sprintf("cannot mount the copy-on-write layer of %s in a user namespace (%v)", b.Target, err)}
	}
	return nil
}

// bindTarget makes the mount point of a bind: a directory, or for a file
// a file, which must be a regular file where one is there already (a
// file of an earlier bind: never a link, which the mount would follow).
func bindTarget(target string, file bool) error {
	if !file {
		return os.MkdirAll(target, 0o755)
	}
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return err
	}
	fi, err := os.Lstat(target)
	switch {
	case err == nil && !fi.Mode().IsRegular():
		return fmt.Errorf("%s is not a regular file", target)
	case err == nil:
		return nil
	case !os.IsNotExist(err):
		return err
	}
	f, err := os.OpenFile(target, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	return f.Close()
}

// fdFrozen is the descriptor of an overlay's frozen layer j: after the binds'.
func fdFrozen(spec *Spec, j int) int { return fdBinds + len(spec.Binds) + j }

// fdBindUpper is the descriptor of the upper directory of bind i, a
// copy-on-write layer: after the frozen layers, one per such bind.
func fdBindUpper(spec *Spec, i int) int {
	fd := fdBinds + len(spec.Binds)
	if spec.Overlay != nil {
		fd += len(spec.Overlay.Frozen)
	}
	for _, b := range spec.Binds[:i] {
		if b.Upper != "" {
			fd++
		}
	}
	return fd
}

// DaemonView is where, in an overlay run's view, the daemon finds the
// workspace without its protected paths' read-only mounts.
const DaemonView = "/.paddock-view"
