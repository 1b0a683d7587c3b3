//go:build linux

// Package projquota bounds a directory's disk use with the file system's
// own project quota (XFS, or ext4 made with the quota and project features
// and mounted with prjquota): the directory and everything made below it
// carry a project id, and the kernel refuses (EDQUOT) a write that would
// take the project past its limit, as it happens, not at the next look.
//
// It talks to the kernel directly: FS_IOC_FSGETXATTR/FS_IOC_FSSETXATTR to
// mark a directory tree, quotactl_fd(2) (Linux 5.14) to read and set the
// project's limit. Where the file system offers no project quota, Supported
// says why, and the caller keeps its own watch.
package projquota

import (
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The kernel's ABI (linux/fs.h, linux/quota.h), which x/sys does not name.
const (
	fsIocFsgetxattr           = 0x801c581f // _IOR('X', 31, struct fsxattr)
	fsIocFssetxattr           = 0x401c5820 // _IOW('X', 32, struct fsxattr)
	fsXflagProjinherit        = 0x00000200
	prjQuota                  = 2
	qXgetqstatv               = 0x5808 // XQM_CMD(8): the quota state, versioned (linux/dqblk_xfs.h)
	fsQstatvVersion1          = 1
	fsQuotaPdqAcct            = 1 << 4
	fsQuotaPdqEnfd            = 1 << 5
	qGetquota                 = 0x800007
	qSetquota                 = 0x800008
	qifBlimits                = 1
	qifDqblksize              = 1024
	minProjectID       uint32 = 1 << 20 // ids below are left to the operator's own projects
)

type fsxattr struct {
	xflags     uint32
	extsize    uint32
	nextents   uint32
	projid     uint32
	cowextsize uint32
	pad        [8]byte
}

type dqblk struct {
	bhardlimit uint64
	bsoftlimit uint64
	curspace   uint64
	ihardlimit uint64
	isoftlimit uint64
	curinodes  uint64
	btime      uint64
	itime      uint64
	valid      uint32
	_          uint32
}

type fsQfilestatv struct {
	ino      uint64
	nblks    uint64
	nextents uint32
	_        uint32
}

// fsQuotaStatv is struct fs_quota_statv (linux/dqblk_xfs.h).
type fsQuotaStatv struct {
	version   int8
	_         uint8
	flags     uint16
	incoredqs uint32
	uquota    fsQfilestatv
	gquota    fsQfilestatv
	pquota    fsQfilestatv
	_         [3]int32  // timer limits
	_         [4]uint16 // warning limits, pad
	_         uint32
	_         [7]uint64
}

func quotactl(dir string, cmd uint32, id uint32, addr unsafe.Pointer) error {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	// The command as quotactl(2)'s QCMD packs it with the quota type.
	_, _, errno := unix.Syscall6(unix.SYS_QUOTACTL_FD, uintptr(fd), uintptr(cmd)<<8|prjQuota, uintptr(id), uintptr(addr), 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}

// Supported says whether dir's file system enforces project quotas, and if
// not, why. Accounting alone (ext4 made with project quotas but mounted
// without prjquota, XFS with pqnoenforce) is not enforcement.
func Supported(dir string) error {
	st := fsQuotaStatv{version: fsQstatvVersion1}
	err := quotactl(dir, qXgetqstatv, 0, unsafe.Pointer(&st))
	switch {
	case err == nil && st.flags&fsQuotaPdqEnfd != 0:
		return nil
	case err == nil && st.flags&fsQuotaPdqAcct != 0:
		return errors.New("project quotas are accounted but not enforced on this file system (mount it with prjquota, or XFS with pquota)")
	case err == nil, errors.Is(err, unix.ESRCH), errors.Is(err, unix.ENOENT):
		return errors.New("project quotas are off on this file system (XFS with pquota, or ext4 made with -O quota,project and mounted with prjquota)")
	case errors.Is(err, unix.ENOSYS):
		// The file system has no quota operations, or the kernel no
		// quotactl_fd: a bad descriptor tells them apart.
		if _, _, errno := unix.Syscall6(unix.SYS_QUOTACTL_FD, ^uintptr(0), 0, 0, 0, 0, 0); errno == unix.ENOSYS {
			return errors.New("this kernel has no quotactl_fd (Linux 5.14+)")
		}
		return errors.New("this file system has no quotas")
	case errors.Is(err, unix.ENOTTY), errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.EINVAL):
		return errors.New("this file system has no project quotas")
	}
	return fmt.Errorf("project quota: %w", err)
}

// ID is the project id for key (a run's id): stable, and above the ids an
// operator numbers their own projects with.
func ID(key string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(key))
	return minProjectID + h.Sum32()%(1<<31-minProjectID)
}

// Set marks dir and everything below it with project id, to be inherited
// by all that is made there, and bounds the project to limit bytes. The
// tree may be written by others meanwhile (a run's commands): it is walked
// by descriptor, each name opened beneath its parent without following a
// link, so no swap of a directory for a link can point the mark elsewhere.
func Set(dir string, id uint32, limit int64) error {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("project quota: %w", err)
	}
	err = mark(fd, id)
	unix.Close(fd)
	if err != nil {
		return fmt.Errorf("project quota: mark %s: %w", dir, err)
	}
	q := dqblk{bhardlimit: uint64((limit + qifDqblksize - 1) / qifDqblksize), valid: qifBlimits}
	if err := quotactl(dir, qSetquota, id, unsafe.Pointer(&q)); err != nil {
		return fmt.Errorf("project quota: set the limit of %s: %w", dir, err)
	}
	return nil
}

// mark sets project id on the directory fd and, below it, on every
// directory and regular file (a link, a fifo, a socket holds no blocks).
func mark(fd int, id uint32) error {
	if err := setProject(fd, id, true); err != nil {
		return err
	}
	// ReadDir on a duplicate: closing it must not close fd, the caller's.
	dup, err := unix.Dup(fd)
	if err != nil {
		return err
	}
	d := os.NewFile(uintptr(dup), "")
	defer d.Close()
	for {
		ents, err := d.ReadDir(256)
		for _, e := range ents {
			if !e.IsDir() && !e.Type().IsRegular() {
				continue
			}
			flags := unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_CLOEXEC
			if e.IsDir() {
				flags |= unix.O_DIRECTORY
			}
			cfd, err := unix.Openat(fd, e.Name(), flags, 0)
			if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
				continue // gone, or swapped for a link or a file meanwhile
			}
			if err != nil {
				return err
			}
			var st unix.Stat_t
			if err := unix.Fstat(cfd, &st); err != nil {
				unix.Close(cfd)
				return err
			}
			switch st.Mode & unix.S_IFMT {
			case unix.S_IFDIR:
				err = mark(cfd, id)
			case unix.S_IFREG:
				err = setProject(cfd, id, false)
			}
			unix.Close(cfd)
			if err != nil {
				return err
			}
		}
		if err != nil {
			if err == io.EOF {
				return nil
			}
			return err
		}
	}
}

// Clear lifts project id's limit (its files go with their directory).
func Clear(dir string, id uint32) error {
	q := dqblk{valid: qifBlimits}
	if err := quotactl(dir, qSetquota, id, unsafe.Pointer(&q)); err != nil {
		return fmt.Errorf("project quota: clear the limit of %s: %w", dir, err)
	}
	return nil
}

// Usage is the bytes project id holds on dir's file system, and its limit.
func Usage(dir string, id uint32) (used, limit int64, err error) {
	var q dqblk
	if err := quotactl(dir, qGetquota, id, unsafe.Pointer(&q)); err != nil {
		return 0, 0, fmt.Errorf("project quota: %w", err)
	}
	return int64(q.curspace), int64(q.bhardlimit) * qifDqblksize, nil
}

func setProject(fd int, id uint32, dir bool) error {
	var x fsxattr
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), fsIocFsgetxattr, uintptr(unsafe.Pointer(&x))); errno != 0 {
		return errno
	}
	x.projid = id
	if dir {
		x.xflags |= fsXflagProjinherit
	}
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), fsIocFssetxattr, uintptr(unsafe.Pointer(&x))); errno != 0 {
		return errno
	}
	return nil
}
