package approval_test

import (
	"strings"
	"testing"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/approval"
)

const h = "sha256:aaaa"

func rev(p string) paddock.Approval {
	return paddock.Approval{Hash: h, By: p, Principal: p, Role: paddock.RoleReviewer}
}

func admin(p string) paddock.Approval {
	return paddock.Approval{Hash: h, By: p, Principal: p, Role: paddock.RoleAdmin}
}

func op(by string) paddock.Approval {
	return paddock.Approval{Hash: h, By: by, Role: paddock.RoleAdmin}
}

func TestEvaluate(t *testing.T) {
	team := paddock.TeamApprovalPolicy()
	autoPol := &paddock.ApprovalPolicy{Approvals: 1, Auto: &paddock.AutoApproval{MaxLines: 10, Risky: []string{"ci_config"}}}
	byPolicy := paddock.Approval{Hash: h, By: approval.AutoBy, Auto: true}
	for name, c := range map[string]struct {
		pol       *paddock.ApprovalPolicy
		approvals []paddock.Approval
		labels    []string
		self      []string
		met       bool
		rule      string
		need      int
		have      int
		reason    string
	}{
		"no approval, the default":  {nil, nil, nil, nil, false, "approvals", 1, 0, "0 of 1 approval"},
		"the operator, the default": {nil, []paddock.Approval{op("ada")}, nil, nil, true, "approvals", 1, 1, "met: 1 of 1 approval (ada)"},
		"another hash":              {nil, []paddock.Approval{{Hash: "sha256:bbbb", By: "ada", Role: paddock.RoleAdmin}}, nil, nil, false, "approvals", 1, 0, ""},
		"self does not count":       {nil, []paddock.Approval{rev("ann")}, nil, []string{"ann"}, false, "approvals", 1, 0, "ann's own approval does not count"},
		"self allowed": {&paddock.ApprovalPolicy{AllowSelfApproval: true}, []paddock.Approval{rev("ann")}, nil, []string{"ann"},
			true, "approvals", 1, 1, ""},
		"the operator is never self": {nil, []paddock.Approval{op("ann")}, nil, []string{"ann"}, true, "approvals", 1, 1, ""},
		"twice by one counts once":   {&paddock.ApprovalPolicy{Approvals: 2}, []paddock.Approval{rev("ann"), rev("ann")}, nil, nil, false, "approvals", 2, 1, "1 of 2 approvals"},
		"two distinct":               {&paddock.ApprovalPolicy{Approvals: 2}, []paddock.Approval{rev("ann"), rev("bob")}, nil, nil, true, "approvals", 2, 2, "(ann, bob)"},
		"team, no label, one reviewer": {team, []paddock.Approval{rev("ann")}, []string{"large"}, nil,
			true, "approvals", 1, 1, "from role:reviewer, role:admin"},
		"team, ci_config, one reviewer": {team, []paddock.Approval{rev("ann")}, []string{"ci_config"}, nil,
			false, "label:ci_config", 2, 1, "1 of 2 approvals from role:reviewer, role:admin for label ci_config"},
		"team, ci_config, two": {team, []paddock.Approval{rev("ann"), admin("bob")}, []string{"ci_config"}, nil,
			true, "label:ci_config", 2, 2, ""},
		"team, an orchestrator does not count": {team, []paddock.Approval{rev("ann"), {Hash: h, By: "otto", Principal: "otto", Role: paddock.RoleOrchestrator}}, []string{"secret"}, nil,
			false, "label:secret", 2, 1, ""},
		"label rule with its own from": {&paddock.ApprovalPolicy{Approvals: 1, Labels: []paddock.LabelRule{{Label: "secret", Approvals: 1, From: []string{"sec"}}}},
			[]paddock.Approval{rev("ann")}, []string{"secret"}, nil, false, "label:secret", 1, 0, "0 of 1 approval from sec for label secret"},
		"label rule with its own from, met": {&paddock.ApprovalPolicy{Approvals: 1, Labels: []paddock.LabelRule{{Label: "secret", Approvals: 1, From: []string{"sec"}}}},
			[]paddock.Approval{rev("ann"), rev("sec")}, []string{"secret"}, nil, true, "approvals", 1, 2, ""},
		"from a principal by name": {&paddock.ApprovalPolicy{From: []string{"ann"}}, []paddock.Approval{rev("bob")}, nil, nil, false, "approvals", 1, 0, "0 of 1 approval from ann"},
		"the operator is role admin": {&paddock.ApprovalPolicy{From: []string{"role:reviewer"}}, []paddock.Approval{op("ada")}, nil, nil,
			false, "approvals", 1, 0, ""},
		"auto":                      {autoPol, []paddock.Approval{byPolicy}, []string{"large"}, nil, true, "auto", 1, 1, "approved by the policy itself"},
		"auto, risky label now":     {autoPol, []paddock.Approval{byPolicy}, []string{"ci_config"}, nil, false, "approvals", 1, 0, ""},
		"auto, policy without auto": {&paddock.ApprovalPolicy{}, []paddock.Approval{byPolicy}, nil, nil, false, "approvals", 1, 0, ""},
	} {
		t.Run(name, func(t *testing.T) {
			d := approval.Evaluate(c.pol, c.approvals, h, c.labels, c.self)
			if d.Met != c.met || d.Rule != c.rule || d.Need != c.need || d.Have != c.have || !strings.Contains(d.Reason, c.reason) {
				t.Fatalf("got %+v; want met %v rule %s need %d have %d reason ~%q", d, c.met, c.rule, c.need, c.have, c.reason)
			}
		})
	}
}

func TestCheck(t *testing.T) {
	team := paddock.TeamApprovalPolicy()
	for name, c := range map[string]struct {
		pol  *paddock.ApprovalPolicy
		a    paddock.Approval
		self []string
		rule paddock.Rule // "" when allowed
	}{
		"the operator, default":  {nil, op("ada"), []string{"ada"}, ""},
		"a reviewer, team":       {team, rev("ann"), nil, ""},
		"self, default":          {nil, rev("ann"), []string{"ann"}, approval.RuleSelfApproval},
		"self, allowed":          {&paddock.ApprovalPolicy{AllowSelfApproval: true}, rev("ann"), []string{"ann"}, ""},
		"an orchestrator, team":  {team, paddock.Approval{Principal: "otto", By: "otto", Role: paddock.RoleOrchestrator}, nil, approval.RuleFrom},
		"named in a label rule":  {&paddock.ApprovalPolicy{From: []string{"ann"}, Labels: []paddock.LabelRule{{Label: "secret", Approvals: 1, From: []string{"sec"}}}}, rev("sec"), nil, ""},
		"not named":              {&paddock.ApprovalPolicy{From: []string{"ann"}}, rev("bob"), nil, approval.RuleFrom},
		"the operator, reviewer": {&paddock.ApprovalPolicy{From: []string{"role:reviewer"}}, op("ada"), nil, approval.RuleFrom},
	} {
		t.Run(name, func(t *testing.T) {
			err := approval.Check(c.pol, "my-app", c.a, c.self)
			if c.rule == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			pe, _ := err.(*paddock.Error)
			if pe == nil || pe.Code != paddock.CodeForbidden || pe.Rule != c.rule || pe.Details["policy"] == nil || !strings.Contains(pe.Message, "my-app") {
				t.Fatalf("got %v, want forbidden by %s", err, c.rule)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	for name, c := range map[string]struct {
		pol *paddock.ApprovalPolicy
		ok  bool
	}{
		"nil":            {nil, true},
		"default":        {paddock.DefaultApprovalPolicy(), true},
		"team":           {paddock.TeamApprovalPolicy(), true},
		"zero is one":    {&paddock.ApprovalPolicy{}, true},
		"eleven":         {&paddock.ApprovalPolicy{Approvals: 11}, false},
		"negative":       {&paddock.ApprovalPolicy{Approvals: -1}, false},
		"unknown role":   {&paddock.ApprovalPolicy{From: []string{"role:boss"}}, false},
		"viewer":         {&paddock.ApprovalPolicy{From: []string{"role:viewer"}}, false},
		"a principal":    {&paddock.ApprovalPolicy{From: []string{"ann"}}, true},
		"empty from":     {&paddock.ApprovalPolicy{From: []string{""}}, false},
		"no label":       {&paddock.ApprovalPolicy{Labels: []paddock.LabelRule{{Approvals: 2}}}, false},
		"label zero":     {&paddock.ApprovalPolicy{Labels: []paddock.LabelRule{{Label: "secret"}}}, false},
		"label bad from": {&paddock.ApprovalPolicy{Labels: []paddock.LabelRule{{Label: "secret", Approvals: 1, From: []string{"role:orchestrator"}}}}, false},
		"auto":           {&paddock.ApprovalPolicy{Auto: &paddock.AutoApproval{MaxLines: 20}}, true},
		"auto unbounded": {&paddock.ApprovalPolicy{Auto: &paddock.AutoApproval{}}, false},
		"auto bad risky": {&paddock.ApprovalPolicy{Auto: &paddock.AutoApproval{MaxLines: 1, Risky: []string{""}}}, false},
	} {
		t.Run(name, func(t *testing.T) {
			err := approval.Validate(c.pol)
			if c.ok != (err == nil) || (err != nil && !paddock.IsCode(err, paddock.CodeBadRequest)) {
				t.Fatalf("Validate: %v, want ok %v", err, c.ok)
			}
		})
	}
}

func TestAutoRefusal(t *testing.T) {
	a := &paddock.AutoApproval{MaxLines: 5}
	if r := approval.AutoRefusal(&paddock.ApprovalPolicy{Auto: a}, nil, 5, false); r != "" {
		t.Fatal(r)
	}
	if r := approval.AutoRefusal(&paddock.ApprovalPolicy{Auto: a}, nil, 6, false); !strings.Contains(r, "6 lines") {
		t.Fatal(r)
	}
	if r := approval.AutoRefusal(&paddock.ApprovalPolicy{Auto: a}, []string{"large"}, 1, false); !strings.Contains(r, "large") {
		t.Fatal(r)
	}
	if r := approval.AutoRefusal(&paddock.ApprovalPolicy{Auto: &paddock.AutoApproval{MaxLines: 5, Risky: []string{"secret"}}}, []string{"large"}, 1, false); r != "" {
		t.Fatal(r)
	}
	if r := approval.AutoRefusal(&paddock.ApprovalPolicy{Auto: a}, nil, 1, true); r == "" {
		t.Fatal("a binary entry approved by itself")
	}
	// The operator counts once, however it connected.
	two := &paddock.ApprovalPolicy{Approvals: 2}
	if d := approval.Evaluate(two, []paddock.Approval{{Hash: "h", By: "tcp:127.0.0.1:50001"}, {Hash: "h", By: "tcp:127.0.0.1:50002"}}, "h", nil, nil); d.Met || d.Have != 1 {
		t.Errorf("two operator connections met a two-approval policy: %+v", d)
	}
	// A label with a rule of its own is never passed by the policy itself,
	// whatever Risky names.
	ruled := &paddock.ApprovalPolicy{Auto: &paddock.AutoApproval{MaxLines: 20, Risky: []string{"ci_config"}},
		Labels: []paddock.LabelRule{{Label: "secret", Approvals: 2}}}
	if r := approval.AutoRefusal(ruled, []string{"secret"}, 1, false); !strings.Contains(r, "secret") {
		t.Errorf("a ruled label: %q", r)
	}
	if d := approval.Evaluate(ruled, []paddock.Approval{{Hash: "h", By: approval.AutoBy, Auto: true}}, "h", []string{"secret"}, nil); d.Met {
		t.Errorf("the policy's own approval passed a label rule: %+v", d)
	}
	if r := approval.AutoRefusal(nil, nil, 1, false); r == "" {
		t.Fatal("no auto approved")
	}
}

func TestDescribe(t *testing.T) {
	got := strings.Join(approval.Describe(paddock.TeamApprovalPolicy()), "\n")
	for _, want := range []string{"1 approval from role:reviewer, role:admin", "label ci_config: 2 approvals", "never by the run's own principal"} {
		if !strings.Contains(got, want) {
			t.Errorf("%q lacks %q", got, want)
		}
	}
	if d := approval.Describe(nil); !strings.Contains(d[0], "the default") {
		t.Errorf("default: %v", d)
	}
}
