package lifecycle

import (
	"os"
	"path/filepath"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/internal/durable"
	"github.com/paddock-dev/paddock/sandbox"
)

// Credentials a run never sees (#30 item 3): its definition's rules (and
// those its create added) name a host, a header and a daemon's secret; a
// command with an allow-list network has its proxy set that header on its
// requests to that host (sandbox/credential.go), and holds a placeholder
// in the rule's variable. Runs with credentials trust the daemon's proxy
// authority (its certificate only, at caDir in their view), so that their
// HTTPS to such a host can be opened to set the header.

// caInView is where a run with credentials finds the proxy's authority:
// proxy-ca.pem (the certificate alone) and bundle.pem (the system's
// authorities and it).
const caInView = "/run/paddock/ca"

// withCredentials is def with more credential rules; def itself is kept.
func withCredentials(def *paddock.AgentDefinition, more []paddock.CredentialRule) *paddock.AgentDefinition {
	if len(more) == 0 {
		return def
	}
	d := *def
	d.Credentials = appendNew(def.Credentials, more)
	return &d
}

// commandCredentials are def's credentials for a command: what its proxy
// sets (values read from the daemon's secrets), and the placeholders its
// environment holds instead, with the variables that make it trust the
// proxy's authority. A rule whose secret the daemon lacks is an error
// that says where to put it.
func commandCredentials(def *paddock.AgentDefinition, secret func(string) (string, bool), ca bool) ([]sandbox.Credential, []string, error) {
	var creds []sandbox.Credential
	var env []string
	for _, rule := range def.Credentials {
		r := rule.Resolved()
		v, ok := "", false
		if secret != nil {
			v, ok = secret(r.Secret)
		}
		if !ok || v == "" {
			return nil, nil, paddock.Errorf(paddock.CodeBadRequest, "credential for %s: the daemon has no secret %s (put its value in <state>/secrets/%s, or PADDOCK_SECRET_%s in the daemon's environment)",
				r.Host, r.Secret, r.Secret, r.Secret)
		}
		if err := maskable(r.Secret, v); err != nil {
			return nil, nil, err
		}
		creds = append(creds, sandbox.Credential{Host: r.Host, Header: r.Header, Value: r.Prefix + v})
		if r.Env != "" {
			env = append(env, r.Env+"="+paddock.CredentialPlaceholder(r.Secret))
		}
	}
	if len(creds) > 0 && ca {
		bundle := caInView + "/bundle.pem"
		env = append(env, "NODE_EXTRA_CA_CERTS="+caInView+"/proxy-ca.pem", "SSL_CERT_FILE="+bundle,
			"REQUESTS_CA_BUNDLE="+bundle, "CURL_CA_BUNDLE="+bundle)
	}
	return creds, env, nil
}

// credentialSecrets are the names of the secrets def's credentials read:
// masked in every output, never put in an environment.
func credentialSecrets(def *paddock.AgentDefinition) []string {
	var out []string
	for _, c := range def.Credentials {
		out = append(out, c.Resolved().Secret)
	}
	return out
}

// caBind is the bind that shows a run with credentials the proxy's
// authority, its files written under aux the first time.
func caBind(ca *sandbox.ProxyCA, def *paddock.AgentDefinition, aux string) ([]sandbox.Bind, error) {
	if len(def.Credentials) == 0 || ca == nil {
		return nil, nil
	}
	dir := filepath.Join(aux, "ca")
	if _, err := os.Stat(filepath.Join(dir, "bundle.pem")); err != nil {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, internal("keeping the proxy's authority for the run failed", err)
		}
		if err := durable.WriteFile(filepath.Join(dir, "proxy-ca.pem"), ca.CertPEM); err != nil {
			return nil, internal("keeping the proxy's authority for the run failed", err)
		}
		if err := durable.WriteFile(filepath.Join(dir, "bundle.pem"), ca.TrustBundle()); err != nil {
			return nil, internal("keeping the proxy's authority for the run failed", err)
		}
		// Readable by the sandbox's uid: certificates, nothing secret.
		os.Chmod(dir, 0o755)
		os.Chmod(filepath.Join(dir, "proxy-ca.pem"), 0o644)
		os.Chmod(filepath.Join(dir, "bundle.pem"), 0o644)
	}
	return []sandbox.Bind{{Source: dir, Target: caInView, ReadOnly: true}}, nil
}
