package containertest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/internal/testenv"
)

// repoRoot is the module's root, two levels up from this package.
func repoRoot(t *testing.T) string {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Dir(wd)
}

// leastPrivilege is what a node's container gets, and nothing more: an
// unprivileged user (the image's, uid 999), no capability at all, no new
// privileges, the engine's default seccomp profile, and /proc unmasked
// (the one relaxation: the kernel refuses a new /proc in a user namespace
// while the container's own has paths masked over it). Its state is a
// volume, on the host's file system: overlayfs takes no upper layer on the
// container's own overlayfs root. The ulimits stay under this machine's
// hard limits (root here lacks CAP_SYS_RESOURCE, ../shared facts).
var leastPrivilege = []string{"--cap-drop=all", "--security-opt", "no-new-privileges", "--security-opt", "unmask=/proc/*"}

// engine runs podman with runc (crun refuses this machine's hybrid
// cgroups) and the ulimits it may set here.
type engine struct {
	t     *testing.T
	image string
	vol   string
}

func (e *engine) run(ctx context.Context, extra []string, args ...string) (string, error) {
	full := []string{"--runtime", "runc", "run", "--rm", "--network", "none",
		"--ulimit", "nofile=4096:4096", "--ulimit", "nproc=4096:4096", "-v", e.vol + ":/var/lib/paddock"}
	full = append(append(full, extra...), args...)
	cmd := exec.CommandContext(ctx, "podman", full...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// TestNodeInPodman: paddock's image, built with no registry and loaded
// into podman, runs a node's sandbox under the least privilege above.
func TestNodeInPodman(t *testing.T) {
	if os.Getuid() != 0 {
		testenv.Need(t, "needs root: podman as root, and mmdebstrap's root mode")
	}
	for _, p := range []string{"podman", "runc", "mmdebstrap", "go"} {
		if _, err := exec.LookPath(p); err != nil {
			testenv.Need(t, "%s is not installed (apt-get install podman runc mmdebstrap)", p)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	root := repoRoot(t)
	dir := t.TempDir()

	// The image, as contrib/oci/build makes it, loaded under a tag of this
	// test's own; removed at the end, with its volume.
	var b [4]byte
	rand.Read(b[:])
	tag := "localhost/paddock-test:" + hex.EncodeToString(b[:])
	start := time.Now()
	build := exec.CommandContext(ctx, filepath.Join(root, "contrib", "oci", "build"), filepath.Join(dir, "image.tar"), tag)
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("contrib/oci/build: %v\n%s", err, out)
	}
	if out, err := exec.CommandContext(ctx, "podman", "load", "-i", filepath.Join(dir, "image.tar")).CombinedOutput(); err != nil {
		t.Fatalf("podman load: %v\n%s", err, out)
	}
	t.Cleanup(func() { exec.Command("podman", "rmi", "-f", tag).Run() })
	t.Logf("image built and loaded in %s", time.Since(start).Round(time.Second))
	e := &engine{t: t, image: tag, vol: "paddock-test-" + hex.EncodeToString(b[:])}
	newVolume := func(t *testing.T) {
		exec.Command("podman", "volume", "rm", "-f", e.vol).Run()
		if out, err := exec.Command("podman", "volume", "create", e.vol).CombinedOutput(); err != nil {
			t.Fatalf("podman volume create: %v\n%s", err, out)
		}
		t.Cleanup(func() { exec.Command("podman", "volume", "rm", "-f", e.vol).Run() })
	}
	if out, err := exec.Command("podman", "image", "inspect", "--format", "{{.Config.User}}", tag).Output(); err != nil || strings.TrimSpace(string(out)) != "999:999" {
		t.Fatalf("the image's user: %q (%v)", out, err)
	}

	t.Run("Doctor", func(t *testing.T) {
		newVolume(t)
		out, err := e.run(ctx, leastPrivilege, "--entrypoint", "/usr/bin/paddock", tag, "doctor", "--json")
		var rep struct {
			Checks []struct{ Name, Status, Detail string }
		}
		if i := strings.Index(out, "{"); i >= 0 {
			json.Unmarshal([]byte(out[i:]), &rep)
		}
		got := map[string]string{}
		for _, c := range rep.Checks {
			got[c.Name] = c.Status + ": " + c.Detail
		}
		for _, name := range []string{"sandbox", "sandbox mode", "landlock", "seccomp", "user namespaces", "git"} {
			if !strings.HasPrefix(got[name], "ok") {
				t.Errorf("doctor in the container: %s is %q (%v)\n%s", name, got[name], err, out)
			}
		}
		if !strings.Contains(got["sandbox mode"], "overlay workspaces work") || !strings.Contains(got["user"], "uid 999") {
			t.Errorf("doctor: sandbox mode %q, user %q", got["sandbox mode"], got["user"])
		}
	})

	// What the one relaxation is for: with /proc masked, as an engine's
	// default has it, the sandbox refuses to run (it never runs a command
	// unconfined).
	t.Run("MaskedProcRefused", func(t *testing.T) {
		newVolume(t)
		out, _ := e.run(ctx, []string{"--cap-drop=all", "--security-opt", "no-new-privileges"}, "--entrypoint", "/usr/bin/paddock", tag, "doctor")
		if !regexpMatch(`fail +sandbox .*cannot mount /proc`, out) {
			t.Errorf("doctor with /proc masked did not say the sandbox fails for /proc:\n%s", out)
		}
	})

	// The sandbox's conformance tests, in the container, as its user.
	t.Run("SandboxConformance", func(t *testing.T) {
		newVolume(t)
		bin := filepath.Join(dir, "bin")
		os.MkdirAll(bin, 0o755)
		c := exec.CommandContext(ctx, "go", "test", "-c", "-o", filepath.Join(bin, "sandbox.test"), "./sandbox")
		c.Dir, c.Env = root, append(os.Environ(), "CGO_ENABLED=0")
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("go test -c ./sandbox: %v\n%s", err, out)
		}
		for _, run := range []string{
			`^(TestBasics|TestEscapes|TestAllowedWork|TestReadOnlyRun|TestOverlayWorkspace|TestProtectedPaths)$`,
			`^TestResident$/^(Escapes|AllowedWork|ReadOnlyRun|ProtectedPaths|Binds)$`,
		} {
			extra := append(append([]string{}, leastPrivilege...), "-v", bin+":/t:ro", "-e", "CI=true", "-e", "TMPDIR=/var/lib/paddock",
				"--entrypoint", "/t/sandbox.test")
			out, err := e.run(ctx, extra, tag, "-test.run", run, "-test.v", "-test.count=1", "-test.timeout=5m")
			if err != nil || !strings.Contains(out, "\nPASS") || strings.Contains(out, "--- SKIP") {
				t.Errorf("sandbox tests %s in the container: %v\n%s", run, err, out)
			} else {
				t.Logf("sandbox tests %s: %d passed in the container", run, strings.Count(out, "--- PASS"))
			}
		}
	})

	// An agent's whole path, as its user would walk it, in the container.
	t.Run("EndToEnd", func(t *testing.T) {
		newVolume(t)
		script := filepath.Join(dir, "e2e.sh")
		os.WriteFile(script, []byte(endToEnd), 0o644)
		out, err := e.run(ctx, append(append([]string{}, leastPrivilege...), "-v", script+":/e2e.sh:ro", "--entrypoint", "/bin/sh"), tag, "/e2e.sh")
		for _, want := range []string{`KIND "kind": "overlay"`, "EXEC hi 999 ", "ESCAPE refused", "ESCAPED-FILE absent", "APPLIED", "by-exec.txt", "hello.txt"} {
			if !strings.Contains(out, want) {
				t.Errorf("the run in the container: no %q (%v)\n%s", want, err, out)
			}
		}
	})
}

// endToEnd runs in the container as the image's user: a project, an
// overlay run (kind auto), a write, a command, an escape refused, a
// submission, an approval, an apply to a branch of the project.
const endToEnd = `set -eu
cd /var/lib/paddock
mkdir -p src/app && cd src/app
git init -q -b main && git config user.email dev@example.com && git config user.name dev
echo hello > README && git add . && git commit -qm init
paddock project add /var/lib/paddock/src/app --name app >/dev/null
id=$(paddock create -p app)
echo "KIND $(paddock show "$id" --json | grep -o '"kind": *"[a-z_]*"' | head -1)"
paddock tool "$id" write --arg path=hello.txt --arg content=hi >/dev/null
echo "EXEC $(paddock exec "$id" -- sh -c 'cat hello.txt; echo; echo written > by-exec.txt; id -u' | tr '\n' ' ')"
if paddock exec "$id" -- sh -c 'echo x > /etc/escaped' 2>/dev/null; then echo "ESCAPE wrote"; else echo "ESCAPE refused"; fi
test -e /etc/escaped && echo "ESCAPED-FILE present" || echo "ESCAPED-FILE absent"
hash=$(paddock submit "$id" --json | grep -o '"hash": *"sha256:[0-9a-f]*"' | head -1 | grep -o 'sha256:[0-9a-f]*')
paddock approve "$id" --hash "$hash" >/dev/null
paddock apply "$id" --to branch=agent >/dev/null
echo "APPLIED $(git -C /var/lib/paddock/src/app show --stat --format=%s agent | tr '\n' ' ')"
paddock stop >/dev/null 2>&1 || true
`

func regexpMatch(re, s string) bool { return regexp.MustCompile(re).MatchString(s) }

// TestKubernetesManifestGrantsWhatWasProved: contrib's StatefulSet asks
// for what TestNodeInPodman proved a node needs, in Kubernetes' words:
// each podman option has its field.
func TestKubernetesManifestGrantsWhatWasProved(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "contrib", "kubernetes", "paddock-nodes.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	m := string(b)
	for podman, k8s := range map[string]string{
		"--cap-drop=all":                   `drop: ["ALL"]`,
		"no-new-privileges":                "allowPrivilegeEscalation: false",
		"unmask=/proc/*":                   "procMount: Unmasked",
		"the image's user 999":             "runAsUser: 999",
		"the pod's own user namespace":     "hostUsers: false",
		"the state on a volume":            "mountPath: /var/lib/paddock",
		"the engine's default seccomp":     "type: RuntimeDefault",
		"no privileged container anywhere": "",
	} {
		if k8s != "" && !strings.Contains(m, k8s) {
			t.Errorf("the manifest does not grant %s (%s)", podman, k8s)
		}
	}
	for _, never := range []string{"privileged: true", "SYS_ADMIN", "Unconfined"} {
		if strings.Contains(m, never) {
			t.Errorf("the manifest asks for %s, more than a node needs", never)
		}
	}
	for _, o := range leastPrivilege {
		if o != "--security-opt" && !strings.Contains("--cap-drop=all no-new-privileges unmask=/proc/*", o) {
			t.Errorf("TestNodeInPodman grants %s, which the manifest's check does not map", o)
		}
	}
}
