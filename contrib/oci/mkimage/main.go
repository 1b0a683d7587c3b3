// Command mkimage assembles paddock's OCI image from a root file system
// made of Debian's packages (contrib/oci/build makes it with mmdebstrap)
// and the static binaries, with no registry and no container engine: the
// image is written as a tarball that `podman load` (or `docker load`)
// takes.
//
//	go run ./contrib/oci/mkimage -rootfs rootfs.tar -bin DIR -o paddock.tar [-tag paddock:dev]
//
// The image runs `paddockd serve` as the user paddock (uid 999, made in the
// root file system) with its state in the volume /var/lib/paddock;
// docs/SCALING.md says which privileges a container of it needs.
package main

import (
	"archive/tar"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// uid is the user the image runs as; the root file system's build makes it.
const uid = 999

func main() {
	rootfs := flag.String("rootfs", "", "the root file system, a tar (contrib/oci/build makes it)")
	bin := flag.String("bin", "", "a directory holding the static paddock and paddockd")
	out := flag.String("o", "paddock-image.tar", "where the image tarball goes")
	tag := flag.String("tag", "localhost/paddock:dev", "the image's name and tag")
	version := flag.String("version", "dev", "the version the image's label says")
	flag.Parse()
	if *rootfs == "" || *bin == "" {
		flag.Usage()
		os.Exit(2)
	}
	if err := build(*rootfs, *bin, *out, *tag, *version); err != nil {
		fmt.Fprintln(os.Stderr, "mkimage:", err)
		os.Exit(1)
	}
}

func build(rootfs, bin, out, tag, version string) error {
	ref, err := name.NewTag(tag)
	if err != nil {
		return fmt.Errorf("tag %q: %w", tag, err)
	}
	base, err := tarball.LayerFromFile(rootfs)
	if err != nil {
		return fmt.Errorf("root file system: %w", err)
	}
	own, err := binLayer(bin)
	if err != nil {
		return err
	}
	img, err := mutate.AppendLayers(empty.Image, base, own)
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS = runtime.GOARCH, "linux" // the binaries are built for the machine mkimage runs on
	cf.Created = v1.Time{Time: time.Now().UTC().Truncate(time.Second)}
	cf.Config = v1.Config{
		User:       fmt.Sprintf("%d:%d", uid, uid),
		Entrypoint: []string{"/usr/bin/paddockd"},
		Cmd:        []string{"serve"},
		Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
			"PADDOCK_HOME=/var/lib/paddock", "HOME=/var/lib/paddock"},
		WorkingDir: "/var/lib/paddock",
		Volumes:    map[string]struct{}{"/var/lib/paddock": {}},
		StopSignal: "SIGTERM",
		Labels: map[string]string{
			"org.opencontainers.image.title":         "paddock",
			"org.opencontainers.image.description":   "a paddock node: a bounded place for AI coding agents to work",
			"org.opencontainers.image.version":       version,
			"org.opencontainers.image.documentation": "docs/SCALING.md",
		},
	}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return err
	}
	if err := tarball.WriteToFile(out, ref, img); err != nil {
		return fmt.Errorf("writing %s: %w", out, err)
	}
	return nil
}

// binLayer is the layer of paddock's own: the binaries in /usr/bin and the
// state directory, the user's, 0700.
func binLayer(bin string) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	now := time.Now().UTC().Truncate(time.Second)
	dirs := []tar.Header{
		{Name: "usr/", Mode: 0o755},
		{Name: "usr/bin/", Mode: 0o755},
		{Name: "var/", Mode: 0o755},
		{Name: "var/lib/", Mode: 0o755},
		{Name: "var/lib/paddock/", Mode: 0o700, Uid: uid, Gid: uid},
	}
	for _, h := range dirs {
		h.Typeflag, h.ModTime = tar.TypeDir, now
		if err := tw.WriteHeader(&h); err != nil {
			return nil, err
		}
	}
	for _, f := range []string{"paddock", "paddockd"} {
		b, err := os.ReadFile(filepath.Join(bin, f))
		if err != nil {
			return nil, err
		}
		if err := tw.WriteHeader(&tar.Header{Name: "usr/bin/" + f, Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(b)), ModTime: now}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(b); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
}
