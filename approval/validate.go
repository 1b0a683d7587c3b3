package approval

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/paddock-dev/paddock"
)

// labelName is what a risk label looks like ("ci_config").
var labelName = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// Validate refuses, with CodeBadRequest, a policy that is not well formed:
// counts outside 0..MaxApprovals (0 is 1), From entries naming no role that
// approves or no principal, label rules without a label, an automatic
// approval with no line bound.
func Validate(pol *paddock.ApprovalPolicy) error {
	if pol == nil {
		return nil
	}
	bad := func(format string, args ...any) error {
		return paddock.Errorf(paddock.CodeBadRequest, "approval policy: "+format, args...).WithRule(RulePolicy)
	}
	if pol.Approvals < 0 || pol.Approvals > MaxApprovals {
		return bad("approvals is %d; want 1 to %d", pol.Approvals, MaxApprovals)
	}
	if err := validFrom(pol.From, "from", bad); err != nil {
		return err
	}
	for i, lr := range pol.Labels {
		where := fmt.Sprintf("labels[%d]", i)
		switch {
		case lr.Label == "":
			return bad("%s names no label", where)
		case !labelName.MatchString(lr.Label):
			return bad("%s: %q is not a risk label (lower case, digits and _)", where, lr.Label)
		case lr.Approvals < 1 || lr.Approvals > MaxApprovals:
			return bad("%s (%s) asks for %d approvals; want 1 to %d", where, lr.Label, lr.Approvals, MaxApprovals)
		}
		if err := validFrom(lr.From, where+".from", bad); err != nil {
			return err
		}
	}
	if a := pol.Auto; a != nil {
		if a.MaxLines <= 0 {
			return bad("auto.max_lines is %d; an automatic approval needs a bound on the lines it approves (at least 1)", a.MaxLines)
		}
		for _, l := range a.Risky {
			if !labelName.MatchString(l) {
				return bad("auto.risky: %q is not a risk label (lower case, digits and _)", l)
			}
		}
	}
	return nil
}

// validFrom checks a From list: "role:NAME" of a role that may approve,
// or a principal's name.
func validFrom(from []string, where string, bad func(string, ...any) error) error {
	for _, f := range from {
		r, isRole := strings.CutPrefix(f, "role:")
		switch {
		case isRole && !paddock.Role(r).Valid():
			return bad("%s: %q names no role (the roles: %s)", where, f, roleList(paddock.Roles))
		case isRole && !slices.Contains(ApproverRoles, paddock.Role(r)):
			return bad("%s: role %s may not approve at all (the roles that approve: %s)", where, r, roleList(ApproverRoles))
		case !isRole && (f == "" || strings.ContainsAny(f, " \t\n:,")):
			return bad("%s: %q is neither role:NAME nor a principal's name", where, f)
		}
	}
	return nil
}

func roleList(rs []paddock.Role) string {
	var s []string
	for _, r := range rs {
		s = append(s, string(r))
	}
	return strings.Join(s, ", ")
}

// Describe says pol (nil: the default) in words, a line per rule.
func Describe(pol *paddock.ApprovalPolicy) []string {
	def := pol == nil
	pol = Or(pol)
	n := max(pol.Approvals, 1)
	who := "anyone who may approve"
	if len(pol.From) > 0 {
		who = strings.Join(pol.From, ", ")
	}
	first := fmt.Sprintf("%d approval%s from %s", n, plural(n), who)
	if def {
		first += " (the default)"
	}
	out := []string{first}
	if pol.AllowSelfApproval {
		out = append(out, "a run's own principal may approve it")
	} else {
		out = append(out, "never by the run's own principal (the operator is none)")
	}
	for _, lr := range pol.Labels {
		from := "the same approvers"
		if len(lr.From) > 0 {
			from = strings.Join(lr.From, ", ")
		}
		out = append(out, fmt.Sprintf("label %s: %d approval%s from %s", lr.Label, lr.Approvals, plural(lr.Approvals), from))
	}
	if a := pol.Auto; a != nil {
		risky := "any label"
		if len(a.Risky) > 0 {
			risky = "a label of " + strings.Join(a.Risky, ", ")
		}
		out = append(out, fmt.Sprintf("automatic approval after a passing verify of the submitted hash, at most %d changed lines, no entry with %s", a.MaxLines, risky))
	}
	return out
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
