package lifecycle_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/lifecycle"
)

const surefire = `<?xml version="1.0" encoding="UTF-8"?>
<testsuite name="com.example.AppTest" tests="3" failures="1" errors="0" skipped="1">
  <testcase name="adds" classname="com.example.AppTest"/>
  <testcase name="subtracts" classname="com.example.AppTest"><failure message="expected 1"/></testcase>
  <testcase name="later" classname="com.example.AppTest"><skipped/></testcase>
</testsuite>
`

// Reports a tool writes into the workspace (surefire's) are read for their
// counts, only those written since the check began: an earlier run's, or
// one an agent left there before, do not count.
func TestWorkspaceReports(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.project(t)
	r := e.create(t, paddock.KindClone, "")
	dir := filepath.Join(r.Workspace.Root, "core", "target", "surefire-reports")
	os.MkdirAll(dir, 0o755)
	old := filepath.Join(dir, "TEST-com.example.OldTest.xml")
	os.WriteFile(old, []byte(surefire), 0o644)
	past := time.Now().Add(-time.Hour)
	os.Chtimes(old, past, past)
	glob := "junit:**/target/surefire-reports/TEST-*.xml"
	since := time.Now().Add(-time.Minute)
	if n, ok := lifecycle.WorkspaceReports(ctx, e.m, r.ID, glob, since); ok {
		t.Fatalf("a report from before the check counted: %+v", n)
	}
	os.WriteFile(filepath.Join(dir, "TEST-com.example.AppTest.xml"), []byte(surefire), 0o644)
	n, ok := lifecycle.WorkspaceReports(ctx, e.m, r.ID, glob, since)
	if !ok || n.Passed != 1 || n.Failed != 1 || n.Skipped != 1 {
		t.Fatalf("counts = %+v, %v", n, ok)
	}
	if _, ok := lifecycle.WorkspaceReports(ctx, e.m, r.ID, "junit:/home/paddock/x/*.xml", since); ok {
		t.Fatal("an absolute glob is the run's home's, not the workspace's")
	}
}
