// Package approval decides whether a submitted change set's approvals meet
// its project's approval policy (paddock.ApprovalPolicy), whether a caller
// may approve at all, and whether a policy is well formed. It is pure: it
// reads what it is given and writes nothing; the lifecycle records what it
// says.
//
// # Who counts
//
// An approval counts towards a rule only if it is of exactly the hash
// under decision, and its approver matches the rule's From ("role:NAME",
// or a principal's name; an empty From is anyone). The operator, who is no
// principal, approves as role admin. An approval by one of the run's own
// principals (the one that created the run, or drove its agent) never
// counts unless the policy allows self-approval. Approvers are counted
// once each: a principal by its name, the operator by the name it gave.
//
// An automatic approval (Approval.Auto) is the policy's own: it meets the
// policy by itself while the policy still has Auto and no label of the
// change set is one Auto finds risky; it never counts as a person's.
package approval

import (
	"fmt"
	"slices"
	"strings"

	"github.com/paddock-dev/paddock"
)

// The rules a refusal or a decision names (paddock.Error.Rule and
// paddock.PolicyDecision.Rule). A label rule is named "label:" and its
// label.
const (
	// RuleApprovals: the policy's own count of approvals.
	RuleApprovals paddock.Rule = "approvals"
	// RuleSelfApproval: the run's own principal may not approve it.
	RuleSelfApproval paddock.Rule = "self_approval"
	// RuleFrom: the caller is none of those the policy lets approve.
	RuleFrom paddock.Rule = "from"
	// RuleAuto: approved by the policy itself (paddock.AutoApproval).
	RuleAuto paddock.Rule = "auto"
	// RulePolicy: the policy itself is not well formed (Validate).
	RulePolicy paddock.Rule = "approval_policy"
)

// LabelRule is the name of the rule a LabelRule for label is.
func LabelRule(label string) paddock.Rule { return paddock.Rule("label:" + label) }

// AutoBy is the name an automatic approval is recorded by.
const AutoBy = "policy"

// MaxApprovals bounds the approvals a rule may ask for.
const MaxApprovals = 10

// ApproverRoles are the roles whose callers may approve (the route table's).
var ApproverRoles = []paddock.Role{paddock.RoleAdmin, paddock.RoleReviewer}

// Or returns pol, or DefaultApprovalPolicy when pol is nil.
func Or(pol *paddock.ApprovalPolicy) *paddock.ApprovalPolicy {
	if pol == nil {
		return paddock.DefaultApprovalPolicy()
	}
	return pol
}

// Of makes the approval a caller gives of hash: nil, or a caller with no
// principal, is the operator, recorded by the name by (its Name if by is
// empty) and as role admin.
func Of(c *paddock.Caller, by, hash string) paddock.Approval {
	a := paddock.Approval{Hash: hash, By: by, Role: paddock.RoleAdmin}
	if c == nil {
		return a
	}
	if c.Principal == "" {
		if a.By == "" {
			a.By = c.Name
		}
		return a
	}
	a.Principal, a.Role, a.By = c.Principal, c.Role, c.Principal
	return a
}

// key is who an approval is by, for counting approvers once each. The
// operator is one approver however it connected (its name says the
// connection: a socket's uid, a TCP port), since nothing tells one
// operator from another: two approvers are two principals.
func key(a paddock.Approval) string {
	switch {
	case a.Principal != "":
		return "principal:" + a.Principal
	case a.Auto:
		return "auto"
	}
	return "operator"
}

// name is how an approver is shown.
func name(a paddock.Approval) string {
	if a.Principal != "" {
		return a.Principal
	}
	return a.By
}

// matches reports whether a's approver is one from names: anyone when
// from is empty.
func matches(from []string, a paddock.Approval) bool {
	if len(from) == 0 {
		return true
	}
	for _, f := range from {
		if r, ok := strings.CutPrefix(f, "role:"); ok {
			if paddock.Role(r) == a.Role {
				return true
			}
		} else if a.Principal != "" && f == a.Principal {
			return true
		}
	}
	return false
}

// isSelf reports whether a is by one of the run's own principals.
func isSelf(a paddock.Approval, self []string) bool {
	return a.Principal != "" && slices.Contains(self, a.Principal)
}

// requirement is one rule of a policy that applies to a change set.
type requirement struct {
	rule  paddock.Rule
	label string
	need  int
	from  []string
}

// requirements are the rules of pol that apply to a change set labelled
// labels: its own count, then each label rule of a label it carries.
func requirements(pol *paddock.ApprovalPolicy, labels []string) []requirement {
	reqs := []requirement{{rule: RuleApprovals, need: max(pol.Approvals, 1), from: pol.From}}
	for _, lr := range pol.Labels {
		if !slices.Contains(labels, lr.Label) {
			continue
		}
		from := lr.From
		if len(from) == 0 {
			from = pol.From
		}
		reqs = append(reqs, requirement{rule: LabelRule(lr.Label), label: lr.Label, need: max(lr.Approvals, 1), from: from})
	}
	return reqs
}

// Evaluate says whether approvals of hash meet pol (nil: the default) for
// a change set whose entries carry labels, when the run's own principals
// are self. It is pure.
func Evaluate(pol *paddock.ApprovalPolicy, approvals []paddock.Approval, hash string, labels []string, self []string) paddock.PolicyDecision {
	pol = Or(pol)
	if d, ok := auto(pol, approvals, hash, labels); ok {
		return d
	}
	var (
		worst     *paddock.PolicyDecision
		strictest paddock.PolicyDecision
		selfSeen  []string
	)
	for _, rq := range requirements(pol, labels) {
		var who []string
		seen := map[string]bool{}
		for _, a := range approvals {
			if a.Hash != hash || a.Auto || seen[key(a)] {
				continue
			}
			if isSelf(a, self) && !pol.AllowSelfApproval {
				if !slices.Contains(selfSeen, name(a)) {
					selfSeen = append(selfSeen, name(a))
				}
				continue
			}
			if !matches(rq.from, a) {
				continue
			}
			seen[key(a)] = true
			who = append(who, name(a))
		}
		d := paddock.PolicyDecision{Met: len(who) >= rq.need, Rule: string(rq.rule), Need: rq.need, Have: len(who), Approvers: who}
		d.Reason = reason(rq, len(who))
		if !d.Met && worst == nil {
			worst = &d
		}
		if d.Need > strictest.Need || strictest.Rule == "" {
			strictest = d
		}
	}
	out := strictest
	if worst != nil {
		out = *worst
	}
	if len(selfSeen) > 0 && !out.Met {
		out.Reason += fmt.Sprintf("; %s's own approval does not count (separation of duties: a run's own principal never approves it)", strings.Join(selfSeen, ", "))
	}
	if out.Met {
		out.Reason = "met: " + out.Reason
		if len(out.Approvers) > 0 {
			out.Reason += " (" + strings.Join(out.Approvers, ", ") + ")"
		}
	}
	return out
}

// reason says a rule's count in words: "1 of 2 approvals from
// role:reviewer for label ci_config".
func reason(rq requirement, have int) string {
	noun := "approvals"
	if rq.need == 1 {
		noun = "approval"
	}
	s := fmt.Sprintf("%d of %d %s", have, rq.need, noun)
	if len(rq.from) > 0 {
		s += " from " + strings.Join(rq.from, ", ")
	}
	if rq.label != "" {
		s += " for label " + rq.label
	}
	return s
}

// auto is the decision an automatic approval of hash makes, if there is
// one and pol still allows it for labels.
func auto(pol *paddock.ApprovalPolicy, approvals []paddock.Approval, hash string, labels []string) (paddock.PolicyDecision, bool) {
	if pol.Auto == nil {
		return paddock.PolicyDecision{}, false
	}
	for _, a := range approvals {
		if a.Hash != hash || !a.Auto {
			continue
		}
		if risky := RiskyFor(pol, labels); len(risky) > 0 {
			return paddock.PolicyDecision{}, false
		}
		return paddock.PolicyDecision{Met: true, Rule: string(RuleAuto), Need: 1, Have: 1, Approvers: []string{AutoBy},
			Reason: fmt.Sprintf("met: approved by the policy itself (verify passed on this hash, no risky label, at most %d changed lines)", pol.Auto.MaxLines)}, true
	}
	return paddock.PolicyDecision{}, false
}

// RiskyFor lists the labels of labels that keep pol's Auto from
// approving: those of Auto.Risky (every label if Risky is empty), and
// every label a label rule asks more for: a stricter rule is never
// passed by the policy's own approval.
func RiskyFor(pol *paddock.ApprovalPolicy, labels []string) []string {
	var out []string
	for _, l := range labels {
		ruled := slices.ContainsFunc(pol.Labels, func(lr paddock.LabelRule) bool { return lr.Label == l })
		if (len(pol.Auto.Risky) == 0 || slices.Contains(pol.Auto.Risky, l) || ruled) && !slices.Contains(out, l) {
			out = append(out, l)
		}
	}
	return out
}

// AutoRefusal says why auto may not approve a change set labelled labels
// that changes lines lines (binary: it holds a binary entry, whose lines
// are not counted), or "" when it may.
func AutoRefusal(pol *paddock.ApprovalPolicy, labels []string, lines int, binary bool) string {
	if pol == nil || pol.Auto == nil {
		return "the policy approves nothing by itself"
	}
	auto := pol.Auto
	switch risky := RiskyFor(pol, labels); {
	case len(risky) > 0:
		return "an entry is labelled " + strings.Join(risky, ", ")
	case binary:
		return "a binary entry's changed lines cannot be counted"
	case lines > auto.MaxLines:
		return fmt.Sprintf("the diff changes %d lines, over the %d the policy approves by itself", lines, auto.MaxLines)
	}
	return ""
}

// mayApprove is who may approve at all under pol: its From, and the From
// of each of its label rules; nil is anyone.
func mayApprove(pol *paddock.ApprovalPolicy) []string {
	if len(pol.From) == 0 {
		return nil
	}
	from := slices.Clone(pol.From)
	for _, lr := range pol.Labels {
		for _, f := range lr.From {
			if !slices.Contains(from, f) {
				from = append(from, f)
			}
		}
	}
	return from
}

// Check refuses, with CodeForbidden and the rule, an approval a may not
// give under project's policy pol (nil: the default): one by the run's
// own principal (self) unless the policy allows it, or by someone the
// policy's From (or a label rule's) does not name.
func Check(pol *paddock.ApprovalPolicy, project string, a paddock.Approval, self []string) error {
	pol = Or(pol)
	who := name(a)
	if isSelf(a, self) && !pol.AllowSelfApproval {
		return paddock.Errorf(paddock.CodeForbidden, "%s created or drove this run, and project %s's approval policy does not let a run's own principal approve it (separation of duties); another reviewer must", who, project).
			WithRule(RuleSelfApproval).WithDetail("project", project).WithDetail("policy", pol)
	}
	if from := mayApprove(pol); !matches(from, a) {
		return paddock.Errorf(paddock.CodeForbidden, "%s (role %s) may not approve in project %s: its approval policy takes approvals from %s only", who, a.Role, project, strings.Join(from, ", ")).
			WithRule(RuleFrom).WithDetail("project", project).WithDetail("policy", pol)
	}
	return nil
}

// Refusal is the error an action that needs the policy met (apply, the
// merge queue) answers when d is not met.
func Refusal(project, id string, d paddock.PolicyDecision) error {
	return paddock.Errorf(paddock.CodeForbidden, "run %s's change set does not meet project %s's approval policy: %s", id, project, d.Reason).
		WithRule(paddock.Rule(d.Rule)).WithDetail("project", project).WithDetail("policy", d)
}
