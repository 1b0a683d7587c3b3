package lifecycle

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/approval"
	"github.com/paddock-dev/paddock/changeset"
)

// Policies holds submissions to their projects' approval policies
// (package approval decides; this records): who approved which hash, what
// the policy said of it, and the policy's own automatic approvals. Approve,
// apply and the merge queue ask it.
type Policies struct {
	*kernel

	approveMu runLocks // a run's submission, read and rewritten by one approval at a time
}

// drivingEvents are the events whose "principal" names one of the run's
// own principals: the one that created it (run.created, run.bootstrapped)
// or drove its agent (run.driven: its first write, command or inbox
// delivery). The events of decisions about the run (approvals, grants,
// applies) are not.
var drivingEvents = []string{paddock.EventRunCreated, paddock.EventBootstrapped, paddock.EventRunDriven}

// lock takes run id's approval lock: a submission's approvals are read,
// added to and saved by one caller at a time.
func (po *Policies) lock(id string) (unlock func()) { return po.approveMu.lock(id) }

// store saves s under the run's approval lock: a submission rewritten
// by another writer (a new submission, an apply, a landing) never lands
// between an approval's read and its write, which would lose one of them.
func (po *Policies) store(s *paddock.Submission) error {
	defer po.lock(s.RunID)()
	return po.saveSubmission(s)
}

// runFacts is what a run's event log says for its policy: its own
// principals, and the hashes a verify passed on (and that were not stale).
type runFacts struct {
	self   []string
	passed map[string]bool
	// forkedFrom is the run this one was forked from, if it was.
	forkedFrom string
}

// facts reads run id's events for its own principals and passing verifies.
// A fork's own principals are also its parent's (and so on up): its
// change set holds their work.
func (po *Policies) facts(ctx context.Context, id string) (*runFacts, error) {
	f, err := po.factsOf(ctx, id)
	if err != nil {
		return nil, err
	}
	for parent, depth := f.forkedFrom, 0; err == nil && parent != "" && depth < maxForkDepth; depth++ {
		var pf *runFacts
		if pf, err = po.factsOf(ctx, parent); err == nil {
			for _, p := range pf.self {
				if !slices.Contains(f.self, p) {
					f.self = append(f.self, p)
				}
			}
			parent = pf.forkedFrom
		}
	}
	return f, err
}

// maxForkDepth bounds how far up a fork's parents facts looks.
const maxForkDepth = 16

// factsOf reads one run's events (facts, without its parents).
func (po *Policies) factsOf(ctx context.Context, id string) (*runFacts, error) {
	f := &runFacts{passed: map[string]bool{}}
	var after int64
	for {
		var evs []*paddock.Event
		if err := po.Store.View(ctx, func(tx paddock.Tx) (err error) {
			evs, err = tx.Events(ctx, id, after, 1000)
			return err
		}); err != nil {
			return nil, err
		}
		for _, e := range evs {
			after = e.Seq
			var d struct {
				Principal string `json:"principal"`
				Hash      string `json:"hash"`
				Passed    bool   `json:"passed"`
				Stale     bool   `json:"stale"`
				Full      bool   `json:"full"`
				From      string `json:"forked_from"`
			}
			if json.Unmarshal(e.Data, &d) != nil {
				continue
			}
			if d.Principal != "" && slices.Contains(drivingEvents, e.Type) && !slices.Contains(f.self, d.Principal) {
				f.self = append(f.self, d.Principal)
			}
			if e.Type == paddock.EventRunCreated && d.From != "" {
				f.forkedFrom = d.From
			}
			if e.Type == paddock.EventVerified && d.Passed && d.Full && !d.Stale && d.Hash != "" {
				f.passed[d.Hash] = true
			}
		}
		if len(evs) < 1000 {
			return f, nil
		}
	}
}

// labelsOf is the union of the risk labels of cs's entries.
func labelsOf(cs *paddock.ChangeSet) []string {
	var out []string
	for _, e := range cs.Entries {
		for _, r := range e.Risks {
			if !slices.Contains(out, r) {
				out = append(out, r)
			}
		}
	}
	slices.Sort(out)
	return out
}

// changedLines counts the lines cs's diff adds or removes (its hunks'
// "+" and "-" lines, never the file headers); binary says an entry is
// binary, whose lines are not counted.
func changedLines(cs *paddock.ChangeSet) (n int, binary bool, err error) {
	for _, e := range cs.Entries {
		binary = binary || e.Binary
	}
	d, err := changeset.OpenDiff(cs)
	if err != nil {
		return 0, binary, internal("reading the diff failed", err)
	}
	defer d.Close()
	sc := bufio.NewScanner(d)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	inHunk := false
	for sc.Scan() {
		line := sc.Bytes()
		switch {
		case len(line) == 0:
		case bytes.HasPrefix(line, []byte("diff --git ")):
			inHunk = false
		case bytes.HasPrefix(line, []byte("@@ ")):
			inHunk = true
		case inHunk && (line[0] == '+' || line[0] == '-'):
			n++
		}
	}
	if err := sc.Err(); err != nil {
		return 0, binary, internal("reading the diff failed", err)
	}
	return n, binary, nil
}

// approvalsOf are s's approvals; a submission approved before policies
// (by the operator, with no list) has the one approval it records.
func approvalsOf(s *paddock.Submission) []paddock.Approval {
	if len(s.Approvals) == 0 && s.ApprovedBy != "" {
		return []paddock.Approval{{Hash: s.Hash, By: s.ApprovedBy, Role: paddock.RoleAdmin, At: s.ApprovedAt}}
	}
	return s.Approvals
}

// decide says what project p's policy, as it is now, says of s's
// approvals, cs being s's frozen change set. An automatic approval holds
// only while the diff is within the policy's MaxLines still.
func (po *Policies) decide(p *paddock.Project, s *paddock.Submission, cs *paddock.ChangeSet, f *runFacts) (paddock.PolicyDecision, error) {
	labels := labelsOf(cs)
	d := approval.Evaluate(p.Policy, approvalsOf(s), s.Hash, labels, f.self)
	if !d.Met || d.Rule != string(approval.RuleAuto) {
		return d, nil
	}
	lines, binary, err := changedLines(cs)
	if err != nil {
		return d, err
	}
	why := approval.AutoRefusal(p.Policy, labels, lines, binary)
	if why == "" {
		return d, nil
	}
	pol := *p.Policy
	pol.Auto = nil
	d = approval.Evaluate(&pol, approvalsOf(s), s.Hash, labels, f.self)
	d.Reason += "; the policy's own approval no longer holds: " + why
	return d, nil
}

// settle records decision d in s: approved (by the approvers, since the
// first time it was met) when met, not approved otherwise.
func settle(s *paddock.Submission, d paddock.PolicyDecision) {
	s.Policy = &d
	if !d.Met {
		s.ApprovedBy, s.ApprovedAt = "", time.Time{}
		return
	}
	s.ApprovedBy = strings.Join(d.Approvers, ", ")
	if s.ApprovedAt.IsZero() {
		s.ApprovedAt = now()
	}
}

// decisionData is what an event records of a decision.
func decisionData(d paddock.PolicyDecision) map[string]any {
	return map[string]any{"met": d.Met, "rule": d.Rule, "need": d.Need, "have": d.Have, "approvers": d.Approvers, "reason": d.Reason}
}

// approve adds the approval of ctx's caller (the operator by the name
// by, when the call has no principal) of s's hash to s, cs being its
// frozen change set, once, under p's policy, and records it: the caller
// must be one the policy lets approve, and not one of the run's own
// principals (unless the policy allows it). s is approved once the policy
// is met. extra is more of the approved event's data. The caller holds
// the run's approval lock.
func (po *Policies) approve(ctx context.Context, p *paddock.Project, s *paddock.Submission, cs *paddock.ChangeSet, by string, extra map[string]any) (*paddock.Submission, error) {
	a := approval.Of(paddock.CallerOf(ctx), by, s.Hash)
	a.At = now()
	f, err := po.facts(ctx, s.RunID)
	if err != nil {
		return nil, err
	}
	if err := approval.Check(p.Policy, p.Name, a, f.self); err != nil {
		return nil, err
	}
	return po.add(ctx, p, s, cs, f, a, extra)
}

// check refuses, as approve would, ctx's caller's approval of run id
// under project p's policy, before any work towards it.
func (po *Policies) check(ctx context.Context, p *paddock.Project, id, by string) error {
	f, err := po.facts(ctx, id)
	if err != nil {
		return err
	}
	return approval.Check(p.Policy, p.Name, approval.Of(paddock.CallerOf(ctx), by, ""), f.self)
}

// add adds approval a to s unless s has it (the same approver, of the
// same hash), decides, saves s and records a new approval.
func (po *Policies) add(ctx context.Context, p *paddock.Project, s *paddock.Submission, cs *paddock.ChangeSet, f *runFacts, a paddock.Approval, extra map[string]any) (*paddock.Submission, error) {
	s.Approvals = slices.Clone(approvalsOf(s))
	again := slices.ContainsFunc(s.Approvals, func(b paddock.Approval) bool {
		return b.Hash == a.Hash && b.Principal == a.Principal && b.By == a.By && b.Auto == a.Auto
	})
	if !again {
		s.Approvals = append(s.Approvals, a)
	}
	d, err := po.decide(p, s, cs, f)
	if err != nil {
		return nil, err
	}
	settle(s, d)
	if err := po.saveSubmission(s); err != nil {
		return nil, err
	}
	if again {
		return s, nil // recorded the first time
	}
	ev := map[string]any{"hash": s.Hash, "by": a.By, "role": a.Role, "policy": decisionData(d)}
	if a.Principal != "" {
		ev["principal"] = a.Principal
	}
	if a.Auto {
		ev["auto"], ev["rule"] = true, string(approval.RuleAuto)
	}
	maps.Copy(ev, extra)
	return s, po.record(ctx, s.RunID, paddock.EventApproved, ev)
}

// require refuses, with CodeForbidden and the rule, a submission whose
// approvals do not meet project p's policy as it is now (it may have
// grown stricter since they were given). A submission met only under a
// looser policy than the one it was approved under is approved now.
func (po *Policies) require(ctx context.Context, p *paddock.Project, s *paddock.Submission, cs *paddock.ChangeSet) error {
	f, err := po.facts(ctx, s.RunID)
	if err != nil {
		return err
	}
	standing, err := po.standing(ctx, s)
	if err != nil {
		return err
	}
	d, err := po.decide(p, standing, cs, f)
	if err != nil {
		return err
	}
	if !d.Met {
		return approval.Refusal(p.Name, s.RunID, d)
	}
	// The approvers the apply names are those that stand now.
	settle(s, d)
	return nil
}

// standing is s with only the approvals that still stand: a principal's
// counts while the principal exists with the role it approved with (one
// removed, or made a viewer since, approves nothing any more).
func (po *Policies) standing(ctx context.Context, s *paddock.Submission) (*paddock.Submission, error) {
	out := *s
	if len(s.Approvals) == 0 {
		return &out, nil // approved before policies: the operator's (approvalsOf)
	}
	out.Approvals, out.ApprovedBy = nil, ""
	err := po.Store.View(ctx, func(tx paddock.Tx) error {
		for _, a := range s.Approvals {
			if a.Principal != "" {
				p, err := tx.Principals().Principal(ctx, a.Principal)
				if paddock.IsCode(err, paddock.CodeNotFound) || (err == nil && p.Role != a.Role) {
					continue
				}
				if err != nil {
					return err
				}
			}
			out.Approvals = append(out.Approvals, a)
		}
		return nil
	})
	return &out, err
}

// afterVerify approves run id's submission on its project's authority,
// when its policy has Auto, verify passed on exactly the submitted hash,
// and nothing Auto forbids is in it (a risky label, too many lines); when
// Auto forbids it, the submission's decision says why. Nothing here fails
// the verify: what goes wrong is logged.
func (po *Policies) afterVerify(ctx context.Context, id string, res *paddock.VerifyResult) {
	if res == nil || !res.Passed || res.Stale {
		return
	}
	if err := po.autoApprove(ctx, id, res.Hash); err != nil {
		po.log().Error("approving a verified change set by the project's policy failed", "run", id, "hash", res.Hash, "err", err)
	}
}

// autoApprove is afterVerify's (and a submission's, when a verify of its
// hash passed already): verified is the hash that passed, "" to look for
// one in the run's events.
func (po *Policies) autoApprove(ctx context.Context, id, verified string) error {
	ctx = context.WithoutCancel(ctx)
	defer po.lock(id)()
	s, err := po.submission(id)
	if err != nil {
		return nil // nothing submitted: nothing to approve
	}
	if s.AppliedTo != "" || !s.ApprovedAt.IsZero() || (verified != "" && verified != s.Hash) {
		return nil
	}
	r, p, err := po.runAndProject(ctx, id)
	if err != nil || r == nil || p.Policy == nil || p.Policy.Auto == nil {
		return err
	}
	f, err := po.facts(ctx, id)
	if err != nil {
		return err
	}
	if !f.passed[s.Hash] {
		return nil
	}
	cs, err := po.frozen(id, s.Hash)
	if err != nil {
		return internal("reading the frozen change set failed", err)
	}
	lines, binary, err := changedLines(cs)
	if err != nil {
		return err
	}
	if why := approval.AutoRefusal(p.Policy, labelsOf(cs), lines, binary); why != "" {
		d, err := po.decide(p, s, cs, f)
		if err != nil {
			return err
		}
		d.Reason += "; not approved by the policy itself: " + why
		s.Policy = &d
		po.log().Info("the project's policy does not approve this change set by itself", "run", id, "hash", s.Hash, "reason", why)
		return po.saveSubmission(s)
	}
	a := paddock.Approval{Hash: s.Hash, By: approval.AutoBy, At: now(), Auto: true}
	_, err = po.add(ctx, p, s, cs, f, a, map[string]any{"lines": lines})
	return err
}
