package paddock

import "time"

// ApprovalPolicy is a project's rule for when a submitted change set is
// approved: how many approvals, from whom, never by the run's own
// principals, stricter by risk label, and automatic approval where the
// operator wants it. It is data in the project's registration; nil is
// DefaultApprovalPolicy. Apply and the merge queue check it, not only the
// presence of an approval.
type ApprovalPolicy struct {
	// Approvals is how many distinct callers must approve the hash (1 if 0).
	Approvals int `json:"approvals,omitempty"`
	// From names who may approve: "role:NAME" for a role, or a
	// principal's name. Empty: whoever the route table lets approve.
	From []string `json:"from,omitempty"`
	// AllowSelfApproval lets the principal that created the run, or drove
	// its agent, approve it. Off by default (separation of duties); the
	// operator, who is no principal, is not held to it.
	AllowSelfApproval bool `json:"allow_self_approval,omitempty"`
	// Labels are stricter rules for change sets that carry a risk label.
	Labels []LabelRule `json:"labels,omitempty"`
	// Auto, if set, approves a change set on the policy's own authority,
	// recorded as such, when every condition holds.
	Auto *AutoApproval `json:"auto,omitempty"`
}

// LabelRule asks more of a change set with an entry labelled Label.
type LabelRule struct {
	Label     string   `json:"label"`
	Approvals int      `json:"approvals"`
	From      []string `json:"from,omitempty"`
}

// AutoApproval approves without a person when verify passed on the exact
// submitted hash, no entry carries a risk label of Labels (every label, if
// empty), and the diff changes at most MaxLines lines.
type AutoApproval struct {
	MaxLines int `json:"max_lines"`
	// Risky, if set, lists the labels that prevent it; empty: any label.
	Risky []string `json:"risky,omitempty"`
}

// RiskyLabels are the labels the "team" policy asks two reviewers for.
var RiskyLabels = []string{"ci_config", "agent_config", "executable", "secret", "dependency_manifest"}

// DefaultApprovalPolicy is a project's policy when it sets none: one
// approval, by whoever may approve, not by the run's own principal.
func DefaultApprovalPolicy() *ApprovalPolicy { return &ApprovalPolicy{Approvals: 1} }

// TeamApprovalPolicy is the preset `paddock project set --policy team`:
// one reviewer, two for a change set with a risky label, never the run's
// own principal.
func TeamApprovalPolicy() *ApprovalPolicy {
	p := &ApprovalPolicy{Approvals: 1, From: []string{"role:reviewer", "role:admin"}}
	for _, l := range RiskyLabels {
		p.Labels = append(p.Labels, LabelRule{Label: l, Approvals: 2, From: []string{"role:reviewer", "role:admin"}})
	}
	return p
}

// Approval is one caller's approval of one hash.
type Approval struct {
	Hash      string    `json:"hash"`
	By        string    `json:"by"`                  // the caller's name
	Principal string    `json:"principal,omitempty"` // empty for the operator
	Role      Role      `json:"role,omitempty"`
	At        time.Time `json:"at"`
	// Auto: made by the project's policy itself (AutoApproval), not a person.
	Auto bool `json:"auto,omitempty"`
}

// PolicyDecision is what a policy said of a submission's approvals: met,
// or which rule still refuses and why.
type PolicyDecision struct {
	Met bool `json:"met"`
	// Rule names the rule that decided: "approvals", "label:ci_config",
	// "self_approval", "from", "auto".
	Rule   string `json:"rule"`
	Need   int    `json:"need,omitempty"`
	Have   int    `json:"have,omitempty"`
	Reason string `json:"reason"`
	// Approvers are the callers whose approvals count towards it.
	Approvers []string `json:"approvers,omitempty"`
}
