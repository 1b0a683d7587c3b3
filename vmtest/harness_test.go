package vmtest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/internal/testenv"
)

// The harness: a kernel cached by .ci/vm-kernels, an initramfs made of
// busybox-static and that kernel's 9p, virtio, overlay and ext4 modules,
// and a qemu that boots it with the host's root shown read-only over 9p.
// The guest's root is an overlay, a tmpfs over that 9p root, so that every
// path is writable and nothing reaches the host. /tmp is an ext4 disk of
// its own, as on a bookworm machine (an overlay cannot be the upper layer
// of the overlays paddock makes there, and before 6.6 a tmpfs keeps no
// user.* extended attributes, which an overlay in a user namespace
// writes); /var/tmp and /run are tmpfs.

// bootModules are the modules the initramfs inserts, with what they
// depend on before them; a module the kernel has built in is left out.
// ext4 asks the crypto API for crc32c when it mounts (a soft dependency,
// not in its depends=): crc32c_generic goes before it.
var bootModules = []string{"virtio_pci", "9pnet_virtio", "9p", "overlay", "virtio_blk", "crc32c_generic", "ext4"}

// cacheDir is where .ci/vm-kernels puts the kernels.
func cacheDir() string {
	if d := os.Getenv("PADDOCK_VM_CACHE"); d != "" {
		return d
	}
	return "/var/cache/paddock-vm"
}

// need is testenv.Need, saying where the missing kernels and qemu come from.
func need(t *testing.T, format string, args ...any) {
	t.Helper()
	testenv.Need(t, "%s", fmt.Sprintf(format, args...)+" (bash .ci/vm-kernels fetches it)")
}

// kernel is one kernel .ci/vm-kernels unpacked: cache/kernels/SERIES.
type kernel struct {
	series, release string
	vmlinuz, modDir string
	pkg             string
}

func findKernel(series string) (*kernel, error) {
	dir := filepath.Join(cacheDir(), "kernels", series)
	images, _ := filepath.Glob(filepath.Join(dir, "boot", "vmlinuz-*"))
	if len(images) != 1 {
		return nil, fmt.Errorf("no kernel %s in %s (found %d images)", series, dir, len(images))
	}
	release := strings.TrimPrefix(filepath.Base(images[0]), "vmlinuz-")
	modDir := filepath.Join(dir, "lib", "modules", release)
	if _, err := os.Stat(filepath.Join(modDir, "modules.builtin")); err != nil {
		return nil, fmt.Errorf("kernel %s: %v", series, err)
	}
	pkg, _ := os.ReadFile(filepath.Join(dir, "package"))
	return &kernel{series: series, release: release, vmlinuz: images[0], modDir: modDir,
		pkg: strings.TrimSpace(string(pkg))}, nil
}

// modName is a module's name as the kernel spells it.
func modName(file string) string {
	base := filepath.Base(file)
	for _, ext := range []string{".ko.xz", ".ko.zst", ".ko.gz", ".ko"} {
		base = strings.TrimSuffix(base, ext)
	}
	return strings.ReplaceAll(base, "-", "_")
}

// moduleFiles writes the modules bootModules need, decompressed, into dir
// as NN-name.ko in the order they must be inserted.
func moduleFiles(k *kernel, dir string) ([]string, error) {
	files := map[string]string{}
	err := filepath.WalkDir(filepath.Join(k.modDir, "kernel"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.Contains(d.Name(), ".ko") {
			files[modName(p)] = p
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	builtin := map[string]bool{}
	b, err := os.ReadFile(filepath.Join(k.modDir, "modules.builtin"))
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Fields(string(b)) {
		builtin[modName(line)] = true
	}
	var order []string
	seen := map[string]bool{}
	var visit func(name string) error
	visit = func(name string) error {
		if seen[name] || builtin[name] {
			return nil
		}
		seen[name] = true
		src, ok := files[name]
		if !ok {
			return fmt.Errorf("kernel %s has no module %s", k.release, name)
		}
		dst := filepath.Join(dir, name+".ko")
		if err := decompress(src, dst); err != nil {
			return err
		}
		deps, err := moduleDepends(dst)
		if err != nil {
			return err
		}
		for _, d := range deps {
			if err := visit(d); err != nil {
				return err
			}
		}
		order = append(order, name)
		return nil
	}
	for _, m := range bootModules {
		if err := visit(m); err != nil {
			return nil, err
		}
	}
	var out []string
	for i, name := range order {
		numbered := filepath.Join(dir, fmt.Sprintf("%02d-%s.ko", i, name))
		if err := os.Rename(filepath.Join(dir, name+".ko"), numbered); err != nil {
			return nil, err
		}
		out = append(out, name)
	}
	return out, nil
}

// decompress copies a module, decompressing .ko.xz and .ko.zst with the
// host's xz or zstd (busybox's xz when there is no xz).
func decompress(src, dst string) error {
	var cmd *exec.Cmd
	switch {
	case strings.HasSuffix(src, ".ko"):
		b, err := os.ReadFile(src)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o644)
	case strings.HasSuffix(src, ".xz"):
		if _, err := exec.LookPath("xz"); err == nil {
			cmd = exec.Command("xz", "-dc", src)
		} else {
			cmd = exec.Command("/bin/busybox", "xz", "-dc", src)
		}
	case strings.HasSuffix(src, ".zst"):
		cmd = exec.Command("zstd", "-dc", src)
	default:
		return fmt.Errorf("%s: unknown compression", src)
	}
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("decompress %s: %v", src, err)
	}
	return os.WriteFile(dst, out, 0o644)
}

// moduleDepends reads the depends= line of a module's .modinfo.
func moduleDepends(ko string) ([]string, error) {
	f, err := elf.Open(ko)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", ko, err)
	}
	defer f.Close()
	s := f.Section(".modinfo")
	if s == nil {
		return nil, fmt.Errorf("%s: no .modinfo", ko)
	}
	data, err := s.Data()
	if err != nil {
		return nil, err
	}
	for _, kv := range bytes.Split(data, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte("depends=")); ok {
			if len(v) == 0 {
				return nil, nil
			}
			var deps []string
			for _, d := range strings.Split(string(v), ",") {
				deps = append(deps, modName(d))
			}
			return deps, nil
		}
	}
	return nil, nil
}

// initScript is the initramfs's /init. /paddock-vm/env (from the boot's
// own archive) sets MODE (shell or systemd), BINDIR (a host directory
// shown at /paddock-vm/bin), MARKER and DISK. The guest's root has
// busybox at /paddock-vm/busybox, and its insmod, rmmod and lsmod last on
// the script's PATH (/paddock-vm/sbin): the host may have no kmod.
const initScript = `#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mkdir -p /proc /sys /dev /lower /upper /newroot
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
# The loopback interface, up as on any machine (the sandbox's proxy
# listens there); systemd would bring it up too.
ip link set lo up
. /paddock-vm/env
fail() { echo "paddock-vm: init: $*"; for i in 1 2 3; do echo "$MARKER rc=125"; done; poweroff -f; }
for m in /modules/*.ko; do insmod "$m" || fail "insmod $m"; done
mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=262144,cache=loose hostroot /lower || fail "mount 9p"
# The kernel's symbols, for the host to name a frozen guest's CPUs with
# (frozen_test.go): Debian's System.map is a placeholder.
# Diagnostics only: a boot goes on without them.
mkdir -p /out
if mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 paddockout /out; then
	cat /proc/kallsyms > /out/kallsyms.tmp && mv /out/kallsyms.tmp /out/kallsyms
	umount /out
else
	echo "paddock-vm: init: no output directory: a frozen guest's CPUs will not be named"
fi
mount -t tmpfs -o mode=0755 upper /upper
mkdir -p /upper/u /upper/w
mount -t overlay -o lowerdir=/lower,upperdir=/upper/u,workdir=/upper/w root /newroot || fail "mount overlay"
mkdir -p /newroot/paddock-vm/bin
cp /paddock-vm/env /paddock-vm/script.sh /paddock-vm/run.sh /bin/busybox /newroot/paddock-vm/
mkdir -p /newroot/paddock-vm/sbin
for a in insmod rmmod lsmod; do ln -s ../busybox /newroot/paddock-vm/sbin/$a; done
if [ -n "$BINDIR" ]; then mount --bind "/lower$BINDIR" /newroot/paddock-vm/bin || fail "bind $BINDIR"; fi
# A container's marker would make systemd (and others) believe they are in
# one: the guest is a machine of its own.
rm -f /newroot/.dockerenv /newroot/run/.containerenv
if [ "$DISK" = 1 ]; then
	for i in 1 2 3 4 5 6 7 8 9 10; do [ -b /dev/vda ] && break; sleep 0.5; done
	mount -t ext4 /dev/vda /newroot/tmp || fail "mount /dev/vda on /tmp"
	chmod 1777 /newroot/tmp
else
	mount -t tmpfs -o mode=1777 tmpfs /newroot/tmp
fi
mount -t tmpfs -o mode=1777 tmpfs /newroot/var/tmp
mount -t tmpfs -o mode=0755 tmpfs /newroot/run
echo "paddock-vm: root ready, mode $MODE"
if [ "$MODE" = systemd ]; then
	u=/newroot/etc/systemd/system
	mkdir -p $u
	cp /paddock-vm/paddock-vm.service /paddock-vm/paddock-vm.target $u/
	for m in $MASK; do ln -sf /dev/null $u/$m; done
	ln -sf paddock-vm.target $u/default.target
fi
mount -t proc proc /newroot/proc
mount -t sysfs sysfs /newroot/sys
mount -t devtmpfs devtmpfs /newroot/dev
umount /proc /sys /dev
if [ "$MODE" = systemd ]; then
	exec switch_root /newroot /lib/systemd/systemd
fi
mount -t cgroup2 cgroup2 /newroot/sys/fs/cgroup
mount -t securityfs securityfs /newroot/sys/kernel/security
mkdir -p /newroot/dev/pts /newroot/dev/shm
mount -t devpts -o newinstance,ptmxmode=0666 devpts /newroot/dev/pts
mount -t tmpfs -o mode=1777 tmpfs /newroot/dev/shm
# switch_root, not chroot: a chrooted process may not make user
# namespaces (clone(2): EPERM), and the sandbox makes them.
exec switch_root /newroot /paddock-vm/busybox sh -c '/bin/sh /paddock-vm/run.sh; sync; /paddock-vm/busybox poweroff -f'
`

// runScript runs the boot's script in the guest's root, as PID 1 or as a
// systemd service, and prints its exit code behind the marker.
const runScript = `. /paddock-vm/env
cd /
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/usr/local/go/bin:/paddock-vm/sbin
export HOME=/root TMPDIR=/tmp LANG=C.UTF-8
# The heartbeat: a console silent for minutes is a frozen guest to the
# harness (frozen_test.go: heartbeatEvery, frozenAfter).
(while sleep 30; do echo "paddock-vm: alive at uptime $(cut -d' ' -f1 /proc/uptime)s"; done) &
export PADDOCK_VM_HEARTBEAT=$!
echo "paddock-vm: script starts at uptime $(cut -d' ' -f1 /proc/uptime)s"
/bin/sh /paddock-vm/script.sh
rc=$?
kill $PADDOCK_VM_HEARTBEAT 2>/dev/null
echo "paddock-vm: script ends at uptime $(cut -d' ' -f1 /proc/uptime)s"
# Three times: a kernel message the console shows (loglevel=5) may cut
# into one.
for i in 1 2 3; do echo "$MARKER rc=$rc"; done
`

// The systemd boot: a target of its own that wants basic.target and the
// script's service, which powers the guest off when it ends.
const systemdTarget = `[Unit]
Description=paddock VM test
Requires=basic.target paddock-vm.service
After=basic.target paddock-vm.service
AllowIsolate=yes
`

const systemdService = `[Unit]
Description=paddock VM test script
SuccessAction=poweroff-force
FailureAction=poweroff-force

[Service]
Type=oneshot
# The script's tests run paddock's sandbox as a packaged daemon would: in a
# cgroup delegated to them.
Delegate=yes
ExecStart=/bin/sh /paddock-vm/run.sh
StandardOutput=journal+console
StandardError=inherit
TimeoutStartSec=infinity
`

// masked are units the systemd boot leaves out: the host's services and
// what waits for hardware or network the guest does not have.
var masked = []string{
	"getty@.service", "serial-getty@.service", "getty.target",
	"systemd-udev-settle.service", "systemd-networkd-wait-online.service",
	"networking.service", "systemd-timesyncd.service", "systemd-pstore.service",
	"avahi-daemon.service", "avahi-daemon.socket", "postgresql.service",
	"e2scrub_reap.service", "apt-daily.timer", "apt-daily-upgrade.timer",
	"dpkg-db-backup.timer", "e2scrub_all.timer", "fstrim.timer", "man-db.timer",
	"systemd-journal-flush.service", "remote-fs.target", "cron.service",
	"ssh.service", "systemd-random-seed.service", "systemd-logind.service",
}

// baseInitramfs builds (or finds cached) the archive of busybox, /init and
// the kernel's modules.
func baseInitramfs(t *testing.T, k *kernel) string {
	t.Helper()
	bb, err := os.ReadFile("/bin/busybox")
	if err != nil {
		need(t, "no /bin/busybox (busybox-static): %v", err)
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%q\x00", k.release, initScript, bootModules)
	h.Write(bb)
	key := hex.EncodeToString(h.Sum(nil))[:16]
	dir := filepath.Join(cacheDir(), "initramfs")
	if os.MkdirAll(dir, 0o755) != nil {
		dir = t.TempDir()
	}
	out := filepath.Join(dir, k.release+"-"+key+".cpio")
	if _, err := os.Stat(out); err == nil {
		return out
	}
	root := t.TempDir()
	for _, d := range []string{"bin", "modules", "paddock-vm"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "bin", "busybox"), bb, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "init"), []byte(initScript), 0o755); err != nil {
		t.Fatal(err)
	}
	mods, err := moduleFiles(k, filepath.Join(root, "modules"))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("initramfs for %s: modules %s", k.release, strings.Join(mods, " "))
	// A name of this build's own: two guests of one kernel boot at once.
	f, err := os.CreateTemp(dir, ".initramfs-*")
	if err != nil {
		t.Fatal(err)
	}
	tmp := f.Name()
	f.Close()
	if err := cpio(root, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// cpio writes dir's tree as a newc archive, owned by root.
func cpio(dir, out string) error {
	if _, err := exec.LookPath("cpio"); err != nil {
		return fmt.Errorf("no cpio: %v", err)
	}
	cmd := exec.Command("sh", "-c", `find . | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet > "$0"`, out)
	cmd.Dir = dir
	if b, err := cmd.CombinedOutput(); err != nil {
		os.Remove(out)
		return fmt.Errorf("cpio: %v: %s", err, b)
	}
	return nil
}

// boot is one guest: its kernel, how it starts its script, and the
// script.
type boot struct {
	kernel  *kernel
	systemd bool   // systemd as PID 1, the script a service of its
	append  string // more kernel parameters
	binDir  string // a host directory the guest sees at /paddock-vm/bin
	script  string // sh, run as root in the guest's root
	timeout time.Duration
	disk    string        // an ext4 image for the guest's /tmp (else a tmpfs)
	silence time.Duration // how long the console may be silent (frozenAfter if 0)
}

// guestCPUs is how many CPUs a guest has.
const guestCPUs = 2

// tmpDisk makes a sparse ext4 image of size bytes in dir, or returns ""
// (the guest's /tmp is then a tmpfs) when there is no mkfs.ext4.
func tmpDisk(t *testing.T, dir string, size int64) string {
	t.Helper()
	mkfs, err := exec.LookPath("mkfs.ext4")
	if err != nil {
		t.Logf("no mkfs.ext4: the guest's /tmp is a tmpfs")
		return ""
	}
	img := filepath.Join(dir, "tmp.ext4")
	f, err := os.Create(img)
	if err != nil {
		t.Fatal(err)
	}
	err = f.Truncate(size)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(mkfs, "-q", "-F", "-E", "lazy_itable_init=1,lazy_journal_init=1", img).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v\n%s", err, out)
	}
	return img
}

// result is what a boot printed and its script's exit code.
type result struct {
	output   string
	code     int // -1: no marker (the guest did not finish its script)
	took     time.Duration
	scriptAt time.Duration // when the script started, on the host's clock
	// hung is the guest kernel's report of a CPU stuck for hangAfter or
	// more (its soft-lockup watchdog's line), or the console's silence
	// (frozen_test.go), when that ended the boot.
	hung string
	// where names the CPUs' places in a guest given up as frozen.
	where string
}

// hangAfter is how long a guest CPU may be reported stuck in its kernel
// before the boot is given up as hung. The guest's watchdog reports a CPU
// that has not scheduled for 20 s, and again every 26 s while it stays
// stuck; an emulated guest on a loaded host can be starved that long and
// recover, but not for four reports in a row (26, 52, 78, 104 s).
const hangAfter = 100

var lockupLine = regexp.MustCompile(`soft lockup - (CPU#\d+) stuck for (\d+)s!.*`)

// hangs follows the watchdog's reports on a guest's console: a CPU
// reported stuck for hangAfter seconds or more, after an earlier report
// of the same CPU (not one report alone, which a jump of the guest's
// clock could make), is a hung kernel.
type hangs map[string]int // reports by CPU

// see returns the report in a console line that makes the guest hung, or "".
func (h hangs) see(line string) string {
	m := lockupLine.FindStringSubmatch(line)
	if m == nil {
		return ""
	}
	h[m[1]]++
	if secs, _ := strconv.Atoi(m[2]); secs >= hangAfter && h[m[1]] >= 2 {
		return m[0]
	}
	return ""
}

var markerLine = regexp.MustCompile(`(PADDOCK-VM-EXIT-[0-9a-f]+) rc=(\d+)`)

// run boots the guest, streams its console to the test's log, and returns
// when qemu exits or the timeout kills it. qemu is killed and the files
// removed whatever happens.
func (b *boot) run(t *testing.T) result {
	t.Helper()
	qemu, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		need(t, "no qemu-system-x86_64 (Debian's qemu-system-x86)")
	}
	base := baseInitramfs(t, b.kernel)
	tmp := t.TempDir()
	var rb [8]byte
	rand.Read(rb[:])
	marker := "PADDOCK-VM-EXIT-" + hex.EncodeToString(rb[:])
	initrd := b.initrd(t, base, tmp, marker)

	// loglevel=5: warnings reach the console, among them the registers
	// and stack of a CPU the watchdog finds stuck.
	cmdline := "console=ttyS0 panic=-1 rdinit=/init loglevel=5 " + b.append
	if b.systemd {
		cmdline += " systemd.unit=paddock-vm.target systemd.show_status=error"
	}
	timeout := b.timeout
	if timeout == 0 {
		timeout = 8 * time.Minute
	}
	silence := b.silence
	if silence == 0 {
		silence = frozenAfter
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	mon := monitor(filepath.Join(tmp, "monitor"))
	outDir := filepath.Join(tmp, "out") // what the guest writes: kallsyms
	if err := os.Mkdir(outDir, 0o755); err != nil {
		t.Fatal(err)
	}
	args := []string{
		"-m", "2048", "-smp", strconv.Itoa(guestCPUs), "-nographic", "-no-reboot", "-nic", "none",
		"-monitor", "unix:" + string(mon) + ",server=on,wait=off",
		"-accel", "tcg,thread=multi",
		"-kernel", b.kernel.vmlinuz, "-initrd", initrd, "-append", cmdline,
		"-virtfs", "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap",
		"-virtfs", "local,path=" + outDir + ",mount_tag=paddockout,security_model=none"}
	if b.disk != "" {
		args = append(args, "-drive", "file="+b.disk+",if=virtio,format=raw,cache=unsafe")
	}
	cmd := exec.CommandContext(ctx, qemu, args...)
	// qemu dies with the test process, even when a panic or the test
	// binary's timeout ends it before any cleanup runs.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.WaitDelay = 5 * time.Second
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatalf("qemu: %v", err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
		}
	})
	var out strings.Builder
	var scriptAt time.Duration
	// mu guards hung, where, heard and started: the console's reader and
	// the silence's watcher both end a boot. The silence counts from the
	// script's start: a boot before it is bounded by the timeout alone
	// (two guests booting at once were silent up to 16 s).
	var mu sync.Mutex
	var hung, where string
	heard, started := time.Now(), false
	lockups := hangs{}
	var wg sync.WaitGroup
	exited := make(chan struct{})
	wg.Add(2)
	go func() {
		// A console silent for silence: a frozen guest (frozen_test.go).
		defer wg.Done()
		tick := time.NewTicker(min(silence/4, 5*time.Second))
		defer tick.Stop()
		for {
			select {
			case <-exited:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			mu.Lock()
			last, done, counting := heard, hung != "", started
			mu.Unlock()
			quiet := time.Since(last)
			if done {
				return
			}
			if !counting || quiet < silence {
				continue
			}
			report, places := frozen(ctx, t, mon, filepath.Join(outDir, "kallsyms"), quiet)
			mu.Lock()
			if heard != last {
				// It spoke while its CPUs were asked about: alive.
				mu.Unlock()
				t.Logf("the guest spoke again after %v of silence: not frozen", quiet.Round(time.Second))
				continue
			}
			if hung == "" {
				hung, where = report, places
				t.Logf("the guest is frozen (%s; %s): qemu killed", report, places)
			}
			mu.Unlock()
			cancel()
			return
		}
	}()
	go func() {
		defer wg.Done()
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64*1024), 1024*1024)
		for sc.Scan() {
			line := strings.TrimRight(sc.Text(), "\r")
			if scriptAt == 0 && strings.Contains(line, "paddock-vm: script starts") {
				scriptAt = time.Since(start)
			}
			t.Logf("[%s %5.1fs] %s", b.kernel.series, time.Since(start).Seconds(), line)
			mu.Lock()
			heard = time.Now()
			if scriptAt != 0 {
				started = true
			}
			if h := lockups.see(line); h != "" && hung == "" {
				// The guest's kernel will not come back: waiting for the
				// timeout would only spend the minutes another boot needs.
				hung = h
				t.Logf("the guest's kernel hung (%s): qemu killed", hung)
				cancel()
			}
			mu.Unlock()
			out.WriteString(line)
			out.WriteByte('\n')
		}
		io.Copy(io.Discard, pr)
	}()
	werr := cmd.Wait()
	close(exited)
	pw.Close()
	wg.Wait()
	r := result{output: out.String(), code: -1, took: time.Since(start), scriptAt: scriptAt, hung: hung, where: where}
	// A hung guest's caller boots it again or fails its configuration.
	switch {
	case hung != "":
		t.Logf("the guest hung after %v", r.took.Round(100*time.Millisecond))
	case ctx.Err() != nil:
		t.Errorf("the guest did not finish in %v: qemu killed", timeout)
	case werr != nil:
		t.Errorf("qemu: %v", werr)
	}
	for _, m := range markerLine.FindAllStringSubmatch(r.output, -1) {
		if m[1] == marker {
			r.code, _ = strconv.Atoi(m[2])
		}
	}
	return r
}

// initrd appends the boot's own archive (its env, script and units) to the
// kernel's base archive: the kernel unpacks both, in order.
func (b *boot) initrd(t *testing.T, base, tmp, marker string) string {
	t.Helper()
	root := filepath.Join(tmp, "root")
	pv := filepath.Join(root, "paddock-vm")
	if err := os.MkdirAll(pv, 0o755); err != nil {
		t.Fatal(err)
	}
	mode := "shell"
	if b.systemd {
		mode = "systemd"
	}
	disk := 0
	if b.disk != "" {
		disk = 1
	}
	env := fmt.Sprintf("MODE=%s\nBINDIR=%s\nMARKER=%s\nDISK=%d\nMASK=%q\n", mode, b.binDir, marker, disk, strings.Join(masked, " "))
	files := map[string]string{
		"env": env, "script.sh": b.script, "run.sh": runScript,
		"paddock-vm.target": systemdTarget, "paddock-vm.service": systemdService,
	}
	for name, text := range files {
		perm := os.FileMode(0o644)
		if strings.HasSuffix(name, ".sh") {
			perm = 0o755
		}
		if err := os.WriteFile(filepath.Join(pv, name), []byte(text), perm); err != nil {
			t.Fatal(err)
		}
	}
	extra := filepath.Join(tmp, "boot.cpio")
	if err := cpio(root, extra); err != nil {
		t.Fatal(err)
	}
	initrd := filepath.Join(tmp, "initrd")
	var all []byte
	for _, f := range []string{base, extra} {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, data...)
	}
	if err := os.WriteFile(initrd, all, 0o644); err != nil {
		t.Fatal(err)
	}
	return initrd
}
