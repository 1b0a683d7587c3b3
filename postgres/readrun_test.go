package postgres_test

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/postgres"
	"github.com/paddock-dev/paddock/postgres/pgtest"
)

// viewOnly is a store without ReadRun: paddock.ReadRun reads it through
// View, as before the batch.
type viewOnly struct{ paddock.Store }

// TestReadRunAsView: ReadRun's one batch answers what View's reads do, for
// runs with and without grants, in two projects, with and without the
// project, and one that does not exist.
func TestReadRunAsView(t *testing.T) {
	ctx := context.Background()
	s, err := postgres.Open(ctx, pgtest.Need(t).Database(t, t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	mkRun(t, s, "app", "r-1", paddock.StateActive)
	mkRun(t, s, "app", "r-2", paddock.StateActive)
	mkRun(t, s, "other", "r-3", paddock.StateActive)
	if err := s.Update(ctx, func(tx paddock.Tx) error {
		for i, run := range []string{"r-1", "r-1", "r-3"} {
			if err := tx.AccessRequests().Create(ctx, &paddock.AccessRequest{ID: fmt.Sprintf("a-%d", i), RunID: run,
				Kind: paddock.AccessTool, Tool: "fetch", Reason: "why", State: "pending", CreatedAt: time.Now().UTC().Add(time.Duration(i) * time.Second)}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, ok := paddock.Store(s).(paddock.RunReader); !ok {
		t.Fatal("the PostgreSQL store reads a run without View")
	}
	for _, id := range []string{"r-1", "r-2", "r-3", "r-none"} {
		for _, with := range []paddock.RunWith{{Grants: true, Project: true}, {Grants: true}, {Project: true}, {}} {
			withProject := with.Project
			r, p, grants, err := paddock.ReadRun(ctx, s, id, with)
			vr, vp, vgrants, verr := paddock.ReadRun(ctx, viewOnly{s}, id, with)
			name := fmt.Sprintf("%s, %+v", id, with)
			if (err == nil) != (verr == nil) || (err != nil && err.Error() != verr.Error()) {
				t.Fatalf("%s: error %v, View's %v", name, err, verr)
			}
			if !reflect.DeepEqual(r, vr) || !reflect.DeepEqual(p, vp) || !reflect.DeepEqual(grants, vgrants) {
				t.Fatalf("%s:\n%+v %+v %+v\nView's:\n%+v %+v %+v", name, r, p, grants, vr, vp, vgrants)
			}
			switch {
			case id == "r-none" && !paddock.IsCode(err, paddock.CodeNotFound):
				t.Fatalf("%s: %v", name, err)
			case id == "r-1" && with.Grants && len(grants) != 2, id == "r-2" && grants != nil, !with.Grants && grants != nil:
				t.Fatalf("%s: grants %+v", name, grants)
			case id != "r-none" && withProject && (p == nil || p.Name != r.Project):
				t.Fatalf("%s: project %+v", name, p)
			case !withProject && p != nil:
				t.Fatalf("%s: a project not asked for: %+v", name, p)
			}
		}
	}
}
