// Package deb holds the tests of paddock's Debian package: build (a bash
// script in this directory) makes it with dpkg-deb from the repository,
// with the maintainer scripts, sysusers.d and tmpfiles.d files beside it.
//
// Everything is in its tests: TestPackage builds the package and reads
// it (its control fields, its files, static binaries, the unit against
// contrib/systemd, completions and docs); TestInstall, as root, installs
// it with dpkg -i, checks what the maintainer scripts did and runs the
// installed binaries, then purges it and checks that nothing is left.
// docs/OPERATIONS.md ("Install from a .deb") says how to build and
// install it by hand.
package deb
