// Package containertest proves a paddock node in a real container engine:
// it builds the OCI image with contrib/oci/build (Debian's packages by
// mmdebstrap, the static binaries, go-containerregistry), loads it into
// Debian's podman (runtime runc) and runs, under the least privilege a
// node needs (docs/SCALING.md, "A node in a container"), the sandbox's
// conformance tests, doctor, and an end-to-end run: a write, a command,
// an escape refused, a submission, an approval and an apply. It also shows
// what that privilege is for: without it the sandbox refuses to run.
//
// The tests need root, podman, runc and mmdebstrap (.ci/run installs
// them); they skip without them, and fail under CI.
package containertest
