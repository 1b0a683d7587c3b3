package changeset

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/confine"
)

// TestSourcedBy: what a .envrc runs is read from the commands direnv
// offers (source, ., source_env, source_up, dotenv), relative to the
// .envrc's directory; what is not a literal path of the project is left.
func TestSourcedBy(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		envrc, content string
		want           []string
	}{
		{".envrc", "source scripts/env.sh\n", []string{"scripts/env.sh"}},
		{".envrc", ". ./lib/x.sh\nsource_env sub\nsource_env_if_exists .envrc.local\n", []string{"lib/x.sh", "sub", ".envrc.local"}},
		{".envrc", "dotenv\ndotenv_if_exists .env.local\n", []string{".env", ".env.local"}},
		{".envrc", "[ -f a.sh ] && source a.sh\nif true; then source b.sh; fi\ncommand source c.sh\n", []string{"a.sh", "b.sh", "c.sh"}},
		{".envrc", "source \"dir with space/z.sh\"\nsource 'q.sh'\nsource \\\n  cont.sh\n", []string{"dir with space/z.sh", "q.sh", "cont.sh"}},
		{"sub/.envrc", "source env.sh\nsource ../top.sh\nsource ../../outside.sh\n", []string{"sub/env.sh", "top.sh"}},
		{"a/b/.envrc", "source_up .envrc.shared\nsource_up\n", []string{"a/.envrc.shared", ".envrc.shared", "a/.envrc", ".envrc"}},
		{".envrc", "source $HOME/x.sh\nsource ~/y.sh\nsource /etc/profile\nsource \"$DIR/z.sh\"\nsource `pwd`/w.sh\n" +
			"source lib/*.sh\n# source commented.sh\necho source no.sh\nsource_url https://example.com/x sha256-x\nsource_up /abs\nPATH_add bin\n", nil},
	} {
		var got []string
		for _, s := range sourcedBy(tc.envrc, "the base's", []byte(tc.content)) {
			got = append(got, s.path)
			if !strings.Contains(s.why, "the base's "+tc.envrc+" (") {
				t.Errorf("%s: %s: why %q", tc.envrc, s.path, s.why)
			}
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s %q: %q, want %q", tc.envrc, tc.content, got, tc.want)
		}
	}
}

// TestSourcedOnlyByAProtectedEnvrc: a project whose policy does not
// protect .envrc gets what its .envrc sources applied, as the .envrc is.
func TestSourcedOnlyByAProtectedEnvrc(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	if err := os.MkdirAll(filepath.Join(base, "scripts"), 0o755); err != nil {
		t.Fatal(err)
	}
	for p, s := range map[string]string{".envrc": "source scripts/env.sh\n", "scripts/env.sh": "x\n"} {
		if err := os.WriteFile(filepath.Join(base, p), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		policy *confine.Policy
		want   bool
	}{{confine.DefaultPolicy(), true}, {&confine.Policy{}, false}, {&confine.Policy{Protected: []string{"**/.envrc"}}, true}} {
		entries := []paddock.ChangeEntry{{Path: "scripts/env.sh", Op: paddock.OpModify}}
		trees := Trees{Base: DirTree(base)}
		if err := labelAcross(entries, t.TempDir(), tc.policy, trees, readAcross(entryDirs(entries), trees)); err != nil {
			t.Fatal(err)
		}
		if got := entries[0].Blocked != "" && slices.Contains(entries[0].Risks, "agent_config"); got != tc.want {
			t.Errorf("policy %v: %+v, want labelled %v", tc.policy.Protected, entries[0], tc.want)
		}
	}
}
