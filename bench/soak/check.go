package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/bench/internal/benchutil"
	"github.com/paddock-dev/paddock/sandbox"
)

// results are the checks' verdicts, in order.
type results struct {
	lines  []string
	failed int
}

// add records check name: passed when problems is empty, else failed
// with the first problems shown.
func (r *results) add(name string, err error, problems ...string) {
	if err != nil {
		problems = append([]string{err.Error()}, problems...)
	}
	if len(problems) == 0 {
		r.lines = append(r.lines, "PASS  "+name)
		return
	}
	r.failed++
	line := fmt.Sprintf("FAIL  %s: %d problems", name, len(problems))
	for i, p := range problems {
		if i == 20 {
			line += fmt.Sprintf("\n        … and %d more", len(problems)-20)
			break
		}
		line += "\n        " + p
	}
	r.lines = append(r.lines, line)
}

// storedRun is a run as the store holds it, with its events.
type storedRun struct {
	id, node, nodeState, state, base string
	lastSeq                          int64
	removed, hasWorkspace            bool
	events                           []storedEvent
}

type storedEvent struct {
	seq  int64
	typ  string
	data string
}

// loadRuns reads every run of the store and its events.
func (s *soak) loadRuns(ctx context.Context) (map[string]*storedRun, error) {
	runs := map[string]*storedRun{}
	rows, err := s.db.Query(ctx, `SELECT r.id, r.last_seq, r.removed_at IS NOT NULL, coalesce(r.node, ''), coalesce(n.state, ''),
		w.run_id IS NOT NULL, coalesce(w.state, ''), coalesce(w.base_revision, '')
		FROM runs r LEFT JOIN workspaces w ON w.run_id = r.id LEFT JOIN paddock_nodes n ON n.id = r.node`)
	if err != nil {
		return nil, fmt.Errorf("reading the runs: %w", err)
	}
	for rows.Next() {
		r := &storedRun{}
		if err := rows.Scan(&r.id, &r.lastSeq, &r.removed, &r.node, &r.nodeState, &r.hasWorkspace, &r.state, &r.base); err != nil {
			rows.Close()
			return nil, fmt.Errorf("reading the runs: %w", err)
		}
		runs[r.id] = r
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading the runs: %w", err)
	}
	rows, err = s.db.Query(ctx, `SELECT run_id, seq, type, coalesce(data::text, '') FROM events ORDER BY run_id, seq`)
	if err != nil {
		return nil, fmt.Errorf("reading the events: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var e storedEvent
		if err := rows.Scan(&id, &e.seq, &e.typ, &e.data); err != nil {
			return nil, fmt.Errorf("reading the events: %w", err)
		}
		if r := runs[id]; r != nil {
			r.events = append(r.events, e)
		}
	}
	return runs, rows.Err()
}

// explained is what a run's events say its state is.
type explained struct {
	state  string // the workspace's state
	holder string // the node its last adoption (or failed one) left it on; "" if never adopted
	review string // where its change set stands on its holder
	lost   string // the node of its last run.node_lost not followed by an adoption
}

// explain folds a run's events: workspace.state moves the workspace; an
// adoption makes it preparing on the adopting node (and leaves its review
// behind: the submission stays on the lost node's disk); a failed
// adoption gives it back as it was, review and all; the change-set events
// move its review.
func explain(evs []storedEvent) (x explained, problems []string) {
	var adoptedFrom string
	var before explained // as the run was when its last adoption began
	for _, e := range evs {
		var d map[string]any
		if e.data != "" {
			if err := json.Unmarshal([]byte(e.data), &d); err != nil {
				problems = append(problems, fmt.Sprintf("event %d (%s) does not read: %v", e.seq, e.typ, err))
			}
		}
		str := func(k string) string { v, _ := d[k].(string); return v }
		switch e.typ {
		case paddock.TransitionEvent:
			if from := str("from"); from != x.state && x.state != "" {
				problems = append(problems, fmt.Sprintf("event %d moves the workspace from %s, but the events before left it %s", e.seq, from, x.state))
			}
			x.state = str("to")
		case paddock.EventAdopted:
			adoptedFrom, before = str("from_state"), x
			x.state, x.holder, x.review, x.lost = string(paddock.StatePreparing), str("to_node"), "", ""
		case paddock.EventAdoptionFailed:
			// Given back as it was: its submission is still on the node it
			// goes back to.
			x = before
			x.state, x.holder = adoptedFrom, str("back_to")
		case paddock.EventNodeLost:
			x.lost = str("node")
		case paddock.EventSubmitted:
			x.review = paddock.ReviewSubmitted
		case paddock.EventApproved:
			x.review = paddock.ReviewApproved
		case paddock.EventApplied:
			x.review = paddock.ReviewApplied
		case paddock.EventUndone:
			x.review = paddock.ReviewApproved
		}
	}
	if x.state == string(paddock.StateRejected) {
		x.review = paddock.ReviewRejected
	}
	return x, problems
}

// checkReviews asks each live run's node where its change set stands
// (the submission is on that node's disk) and compares it with its events.
func (s *soak) checkReviews(ctx context.Context, res *results) {
	runs, err := s.loadRuns(ctx)
	if err != nil {
		res.add("every run's review is as its events say", err)
		return
	}
	var problems []string
	asked := 0
	for _, r := range runs {
		n := s.node(r.node)
		// A cleaned run's submission went with its workspace.
		if n == nil || r.removed || !r.hasWorkspace || r.nodeState != string(paddock.NodeAlive) ||
			r.state == string(paddock.StateCleanupPending) || r.state == string(paddock.StateCleaned) {
			continue
		}
		x, _ := explain(r.events)
		got, err := n.c.Run(ctx, r.id)
		if err != nil {
			problems = append(problems, fmt.Sprintf("run %s on %s: %v", r.id, r.node, err))
			continue
		}
		asked++
		if got.Review != x.review {
			problems = append(problems, fmt.Sprintf("run %s on %s: review %q, its events say %q", r.id, r.node, got.Review, x.review))
		}
	}
	sort.Strings(problems)
	res.add(fmt.Sprintf("every run's review is as its events say (%d runs asked on their nodes)", asked), nil, problems...)
}

// checkEvents: seqs gap-free; the state, holder and removal the events
// explain; every acknowledged call's event there.
func (s *soak) checkEvents(ctx context.Context, res *results) (map[string]*storedRun, bool) {
	runs, err := s.loadRuns(ctx)
	if err != nil {
		res.add("the store's runs and events read", err)
		return nil, false
	}
	var gaps, states, acks []string
	events := 0
	for _, r := range runs {
		events += len(r.events)
		if int64(len(r.events)) != r.lastSeq {
			gaps = append(gaps, fmt.Sprintf("run %s: %d events stored, last_seq %d", r.id, len(r.events), r.lastSeq))
		}
		for i, e := range r.events {
			if e.seq != int64(i+1) {
				gaps = append(gaps, fmt.Sprintf("run %s: event %d has seq %d", r.id, i+1, e.seq))
				break
			}
		}
		x, ps := explain(r.events)
		for _, p := range ps {
			states = append(states, "run "+r.id+": "+p)
		}
		if x.state != r.state {
			states = append(states, fmt.Sprintf("run %s: workspace %q, its events say %q", r.id, r.state, x.state))
		}
		if x.holder != "" && x.holder != r.node {
			states = append(states, fmt.Sprintf("run %s: on node %q, its last adoption says %q", r.id, r.node, x.holder))
		}
		if removed := slices.ContainsFunc(r.events, func(e storedEvent) bool { return e.typ == paddock.EventRunRemoved }); removed != r.removed {
			states = append(states, fmt.Sprintf("run %s: removed %v, its events say %v", r.id, r.removed, removed))
		}
	}
	s.mu.Lock()
	recs := slices.Clone(s.runs)
	s.mu.Unlock()
	has := func(r *storedRun, typ string, marks ...string) bool {
		return slices.ContainsFunc(r.events, func(e storedEvent) bool {
			if e.typ != typ {
				return false
			}
			for _, m := range marks {
				if !strings.Contains(e.data, m) {
					return false
				}
			}
			return true
		})
	}
	acked := 0
	for _, rec := range recs {
		if rec.id == "" {
			continue
		}
		r := runs[rec.id]
		if r == nil {
			acks = append(acks, fmt.Sprintf("run %s (%s): its create was acknowledged, the store has no such run", rec.id, rec.tag))
			continue
		}
		want := func(ok bool, what string) {
			acked++
			if !ok {
				acks = append(acks, fmt.Sprintf("run %s (%s): %s was acknowledged, no event records it", rec.id, rec.tag, what))
			}
		}
		want(has(r, paddock.EventRunCreated), "its create")
		for _, t := range rec.writes {
			want(has(r, paddock.EventToolCall, `"path":"`+t+`"`, `"ok":true`), "the write of "+t)
		}
		for _, t := range rec.execs {
			want(has(r, paddock.EventExec, t), "the command "+t)
		}
		if rec.cs != nil {
			want(has(r, paddock.EventSubmitted, rec.cs.Hash), "the submit of "+rec.cs.Hash)
		}
		if rec.approved != "" {
			want(has(r, paddock.EventApproved, rec.approved), "the approval of "+rec.approved)
		}
		if rec.applied != nil {
			want(has(r, paddock.EventApplied, rec.applied.Hash), "the apply of "+rec.applied.Hash)
		}
		if rec.rejected {
			want(has(r, paddock.TransitionEvent, `"to":"rejected"`), "the reject")
		}
		if rec.removed {
			want(has(r, paddock.EventRunRemoved), "the removal")
		}
	}
	sort.Strings(gaps)
	sort.Strings(states)
	sort.Strings(acks)
	res.add(fmt.Sprintf("no event missing: every run's seqs are 1…last_seq (%d runs, %d events)", len(runs), events), nil, gaps...)
	res.add(fmt.Sprintf("every run is in the state its events explain (workspace state, holder, removal; %d runs)", len(runs)), nil, states...)
	res.add(fmt.Sprintf("every acknowledged call has its event (%d acknowledged calls)", acked), nil, acks...)
	s.stored = runs
	return runs, true
}

var soakBranch = regexp.MustCompile(`^refs/heads/soak/(r[0-9]{4})$`)

// checkRepo: the project repository as it was, but for what was approved
// and applied.
func (s *soak) checkRepo(ctx context.Context, before *repoState, res *results) {
	var problems []string
	if out, err := exec.CommandContext(ctx, "git", "-C", s.repo, "fsck", "--full", "--no-progress").CombinedOutput(); err != nil {
		problems = append(problems, fmt.Sprintf("git fsck: %v: %s", err, strings.TrimSpace(string(out))))
	}
	after, err := readRepo(s.repo)
	if err != nil {
		res.add("the project repository reads", err)
		return
	}
	applies, byBranch := s.storedApplies()
	refProblems, branches, weak := s.checkRefs(before, after, byBranch)
	problems = append(problems, refProblems...)
	// HEAD and the index as they were; the working tree as it was but
	// for the change sets applied into it.
	if after.head != before.head {
		problems = append(problems, fmt.Sprintf("HEAD was %s, is %s", before.head, after.head))
	}
	if after.index != before.index {
		problems = append(problems, "the index changed")
	}
	changed := map[string]string{}
	for p, id := range after.files {
		if before.files[p] != id {
			changed[p] = id
		}
	}
	for p := range before.files {
		if _, ok := after.files[p]; !ok {
			changed[p] = ""
		}
	}
	intoTree := 0
	var expect []paddock.ChangeEntry
	for _, a := range applies {
		if !a.worktree {
			continue
		}
		intoTree++
		if !a.entriesChecked {
			weak++
			tag := ""
			if a.rec != nil {
				tag = a.rec.tag
			}
			for p, id := range changed {
				if tag != "" && strings.HasPrefix(p, "w/"+tag+"/") {
					expect = append(expect, paddock.ChangeEntry{Path: p, Op: paddock.OpCreate, NewBlob: id})
				}
			}
			continue
		}
		expect = append(expect, a.entries...)
	}
	problems = append(problems, compareEntries("the working tree", expect, changed)...)
	sort.Strings(problems)
	res.add(fmt.Sprintf("the project repository is as it was but for what was applied (%d branches, %d change sets into the working tree, %d of them checked by path only; git fsck clean; refs, HEAD, index)",
		branches, intoTree, weak), nil, problems...)
}

// applied is an apply the store records: its run, what it applied where,
// and the entries the client saw submitted, if it saw them.
type applied struct {
	run            *storedRun
	hash, branch   string
	commit         string
	worktree       bool
	rec            *runRec
	entries        []paddock.ChangeEntry
	entriesChecked bool
}

// storedApplies are the applies the store records, and those to a
// branch by its ref.
func (s *soak) storedApplies() ([]*applied, map[string]*applied) {
	var applies []*applied
	byBranch := map[string]*applied{}
	for _, r := range s.stored {
		for _, e := range r.events {
			if e.typ != paddock.EventApplied {
				continue
			}
			var d struct {
				Hash, Branch, Commit string
				Worktree             string
			}
			json.Unmarshal([]byte(e.data), &d)
			a := &applied{run: r, hash: d.Hash, branch: d.Branch, commit: d.Commit, worktree: d.Worktree != ""}
			if rec := s.byID[r.id]; rec != nil {
				a.rec = rec
				if rec.cs != nil && rec.cs.Hash == d.Hash {
					a.entries, a.entriesChecked = rec.cs.Entries, true
				}
			}
			applies = append(applies, a)
			if a.branch != "" {
				byBranch["refs/heads/"+a.branch] = a
			}
		}
	}
	return applies, byBranch
}

// checkRefs: the old refs as they were; each new one a run's applied
// branch, its commit the run's base with exactly the applied entries.
func (s *soak) checkRefs(before, after *repoState, byBranch map[string]*applied) (problems []string, branches, weak int) {
	for name, obj := range before.refs {
		if after.refs[name] != obj {
			problems = append(problems, fmt.Sprintf("ref %s was %s, is %q", name, obj, after.refs[name]))
		}
	}
	for name, obj := range after.refs {
		if _, ok := before.refs[name]; ok {
			continue
		}
		a := byBranch[name]
		if a == nil || !soakBranch.MatchString(name) {
			problems = append(problems, fmt.Sprintf("ref %s (%s): no run's applied event names it", name, obj))
			continue
		}
		branches++
		if a.commit != obj {
			problems = append(problems, fmt.Sprintf("ref %s is %s, run %s's changeset.applied says %s", name, obj, a.run.id, a.commit))
			continue
		}
		if a.rec != nil && strings.TrimPrefix(name, "refs/heads/soak/") != a.rec.tag {
			problems = append(problems, fmt.Sprintf("ref %s was applied by run %s (%s)", name, a.run.id, a.rec.tag))
		}
		parent, err := benchutil.Git(s.repo, "rev-parse", obj+"^")
		if err != nil || parent != a.run.base {
			problems = append(problems, fmt.Sprintf("ref %s: its commit's parent is %q, run %s's base %s (%v)", name, parent, a.run.id, a.run.base, err))
			continue
		}
		changed, err := diffTree(s.repo, parent, obj)
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		if !a.entriesChecked {
			weak++
			for p := range changed {
				if !strings.HasPrefix(p, "w/"+strings.TrimPrefix(name, "refs/heads/soak/")+"/") && !strings.HasPrefix(p, "src/") {
					problems = append(problems, fmt.Sprintf("ref %s changes %s, outside its run's files", name, p))
				}
			}
			continue
		}
		problems = append(problems, compareEntries("ref "+name, a.entries, changed)...)
	}
	for name, a := range byBranch {
		if _, ok := after.refs[name]; !ok {
			problems = append(problems, fmt.Sprintf("run %s's changeset.applied names %s, which the repository does not have", a.run.id, name))
		}
	}
	return problems, branches, weak
}

// diffTree is what commit b changes against a: path → new blob id ("" for
// a deletion).
func diffTree(repo, a, b string) (map[string]string, error) {
	out, err := benchutil.Git(repo, "diff-tree", "-r", "--no-renames", "-z", a, b)
	if err != nil {
		return nil, err
	}
	changed := map[string]string{}
	f := strings.Split(out, "\x00")
	for i := 0; i+1 < len(f); i += 2 {
		meta := strings.Fields(strings.TrimPrefix(f[i], ":"))
		if len(meta) < 5 {
			return nil, fmt.Errorf("git diff-tree %s %s: %q does not read", a, b, f[i])
		}
		id := meta[3]
		if meta[4] == "D" {
			id = ""
		}
		changed[f[i+1]] = id
	}
	return changed, nil
}

// compareEntries checks that changed (path → blob, "" deleted) is exactly
// entries.
func compareEntries(what string, entries []paddock.ChangeEntry, changed map[string]string) []string {
	var problems []string
	want := map[string]string{}
	for _, e := range entries {
		if e.Blocked != "" {
			continue
		}
		id := e.NewBlob
		if e.Op == paddock.OpDelete {
			id = ""
		}
		want[e.Path] = id
	}
	for p, id := range want {
		got, ok := changed[p]
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("%s lacks %s, applied", what, p))
		case got != id:
			problems = append(problems, fmt.Sprintf("%s has %s as %q, the applied change set %q", what, p, got, id))
		}
	}
	for p, id := range changed {
		if _, ok := want[p]; !ok {
			problems = append(problems, fmt.Sprintf("%s changes %s (now %q), which nothing applied there", what, p, id))
		}
	}
	return problems
}

// report prints what the soak did and the checks.
func (s *soak) report(elapsed time.Duration, faults []*fault, left []string, res *results) {
	out := s.out
	s.mu.Lock()
	recs := slices.Clone(s.runs)
	s.mu.Unlock()
	fmt.Fprintf(out, "\nsoak: %s of clients and faults, seed %d\n", elapsed.Round(time.Second), s.cfg.Seed)
	fmt.Fprintf(out, "\nfaults played:\n")
	for _, f := range faults {
		state := "not played (the soak ended first)"
		if !f.began.IsZero() {
			state = fmt.Sprintf("healed after %s", f.healed.Sub(f.began).Round(100*time.Millisecond))
			if f.err != nil {
				state += ", error: " + f.err.Error()
			}
		}
		fmt.Fprintf(out, "  %s: %s\n", f, state)
	}
	for _, n := range s.nodes {
		fmt.Fprintf(out, "  node %s: started %d times, stopped by itself %d times (fenced: its lease lost)\n", n.id, n.starts, n.exits)
	}
	fates := map[string][2]int{}
	var ended []string
	reconciled := 0
	for _, r := range recs {
		f := fates[r.fate]
		f[0]++
		if r.ended == "" {
			f[1]++
		} else {
			ended = append(ended, fmt.Sprintf("%s (%s, %s): %s", r.tag, r.id, r.fate, r.ended))
		}
		fates[r.fate] = f
		reconciled += r.reconciled
	}
	fmt.Fprintf(out, "\nruns: %d released to the clients, %d in the store\n", len(recs), len(s.stored))
	for _, k := range []string{fateBranch, fateWorktree, fateReject, fateSubmit, fateApprove, fateActive} {
		fmt.Fprintf(out, "  %-15s %4d drawn, %4d lived it to its end\n", k, fates[k][0], fates[k][1])
	}
	for _, e := range ended {
		fmt.Fprintf(out, "  ended early: %s\n", e)
	}
	fmt.Fprintf(out, "  calls whose answer was lost and whose effect the client found in the run's events: %d\n", reconciled)

	s.rec.mu.Lock()
	calls := slices.Clone(s.rec.calls)
	s.rec.mu.Unlock()
	byOp := map[string][]time.Duration{}
	count := map[string]int{}
	codes := map[string]int{}
	for _, c := range calls {
		count[c.op]++
		if c.code == "" {
			byOp[c.op] = append(byOp[c.op], c.took)
		} else {
			codes[c.code]++
		}
	}
	fmt.Fprintf(out, "\n| call | made | acknowledged | p50 | p99 |\n|---|---|---|---|---|\n")
	ops := make([]string, 0, len(count))
	for op := range count {
		ops = append(ops, op)
	}
	sort.Strings(ops)
	total, ok := 0, 0
	for _, op := range ops {
		ds := byOp[op]
		total += count[op]
		ok += len(ds)
		p50, p99 := "–", "–"
		if len(ds) > 0 {
			p50, p99 = benchutil.Round(benchutil.Percentile(ds, 50)).String(), benchutil.Round(benchutil.Percentile(ds, 99)).String()
		}
		fmt.Fprintf(out, "| %s | %d | %d (%.1f%%) | %s | %s |\n", op, count[op], len(ds), 100*float64(len(ds))/float64(count[op]), p50, p99)
	}
	fmt.Fprintf(out, "| all | %d | %d (%.1f%%) | | |\n", total, ok, 100*float64(ok)/float64(max(total, 1)))
	fmt.Fprintf(out, "\nerrors by code:")
	keys := make([]string, 0, len(codes))
	for k := range codes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(out, " %s %d;", k, codes[k])
	}
	if len(keys) == 0 {
		fmt.Fprintf(out, " none")
	}
	fmt.Fprintln(out)
	harnesses := 0
	for _, l := range left {
		if strings.Contains(l, sandbox.HarnessArg) {
			harnesses++
		}
	}
	fmt.Fprintf(out, "\nprocesses left behind once the nodes stopped (killed): %d, of them run harnesses: %d\n", len(left), harnesses)
	if len(left) > 0 {
		for i, l := range left {
			if i == 5 {
				fmt.Fprintf(out, "  …\n")
				break
			}
			fmt.Fprintf(out, "  %s\n", l)
		}
	}
	fmt.Fprintf(out, "\nchecks:\n")
	for _, l := range res.lines {
		fmt.Fprintf(out, "  %s\n", l)
	}
}
