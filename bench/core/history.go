package main

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/bench/internal/benchutil"
	"github.com/paddock-dev/paddock/client"
	"github.com/paddock-dev/paddock/gitx/gittest"
)

// historyFiles is how many files the two history repositories hold.
const historyFiles = 100

// historyRows measures what history depth costs a run: an overlay run
// created at a snapshotted base in a repository of deep commits beside the
// same create in one of 5 commits with the same files, interleaved; and,
// for scale, the walk every create made before (git rev-list
// --max-parents=0 HEAD on the deep one) and declaring the deep project,
// which reads its fingerprint with that walk once.
func historyRows(ctx context.Context, c *client.Client, tmp string, deep, nruns int) ([]string, error) {
	shallowRepo, deepRepo := filepath.Join(tmp, "history-5"), filepath.Join(tmp, fmt.Sprintf("history-%d", deep))
	benchutil.Step("generating repositories of 5 and %d commits (%d files each) with git fast-import", deep, historyFiles)
	if err := gittest.History(shallowRepo, 5, historyFiles); err != nil {
		return nil, err
	}
	if err := gittest.History(deepRepo, deep, historyFiles); err != nil {
		return nil, err
	}
	if _, err := c.AddProject(ctx, paddock.AddProjectRequest{Path: shallowRepo, Name: "shallow"}); err != nil {
		return nil, err
	}
	t0 := time.Now()
	if _, err := c.AddProject(ctx, paddock.AddProjectRequest{Path: deepRepo, Name: "deep"}); err != nil {
		return nil, err
	}
	declare := time.Since(t0)
	for _, p := range []string{"shallow", "deep"} { // build each base's snapshot
		r, err := c.Create(ctx, paddock.CreateRunRequest{Project: p, Kind: "overlay"})
		if err != nil {
			return nil, fmt.Errorf("overlay: %w", err)
		}
		c.Remove(ctx, r.ID)
	}
	benchutil.Step("%d × create an overlay run at %d commits, interleaved with the same at 5", nruns, deep)
	var deepCreate, shallowCreate, walk []time.Duration
	for i := 0; i < nruns; i++ {
		for _, p := range []string{"deep", "shallow"} {
			t0 := time.Now()
			r, err := c.Create(ctx, paddock.CreateRunRequest{Project: p, Kind: "overlay"})
			if err != nil {
				return nil, err
			}
			d := time.Since(t0)
			if p == "deep" {
				deepCreate = append(deepCreate, d)
			} else {
				shallowCreate = append(shallowCreate, d)
			}
			if _, err := c.Remove(ctx, r.ID); err != nil {
				return nil, err
			}
		}
		t0 := time.Now()
		if _, err := benchutil.Git(deepRepo, "rev-list", "--max-parents=0", "HEAD"); err != nil {
			return nil, err
		}
		walk = append(walk, time.Since(t0))
	}
	tree := fmt.Sprintf("generated repositories of %d files, history by git fast-import", historyFiles)
	return []string{
		fmt.Sprintf("| create an overlay run at a snapshotted base, %d commits of history (%s; median of %d) | %s | %s (the same create, 5 commits) | %s |",
			deep, tree, nruns, benchutil.Stats(deepCreate), benchutil.Stats(shallowCreate), benchutil.Ratio(deepCreate, shallowCreate)),
		fmt.Sprintf("| the history walk every create made before: git rev-list --max-parents=0 HEAD, %d commits | – | %s | – |",
			deep, benchutil.Stats(walk)),
		fmt.Sprintf("| declare the %d-commit project (once: its fingerprint walks the history) | %s | – | – |", deep, benchutil.Round(declare)),
	}, nil
}
