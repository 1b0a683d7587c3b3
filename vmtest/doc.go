// Package vmtest boots the kernels paddock's users run (Debian bookworm's
// 6.1, with and without Landlock, and bookworm's 6.12) under qemu, with the
// host's root file system shown read-only over 9p below a tmpfs, and runs
// the sandbox's conformance tests and an end-to-end run inside each guest.
//
// Everything is in its tests: TestKernels (the host side) builds the
// binaries, an initramfs per kernel and boots the guests; the TestGuest
// tests run inside a guest (PADDOCK_VM_GUEST=1) and skip elsewhere.
// .ci/vm-kernels fetches qemu and the kernels; docs/OPERATIONS.md ("Other
// kernels") says how to run them by hand.
package vmtest
