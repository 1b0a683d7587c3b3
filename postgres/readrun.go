package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/paddock-dev/paddock"
)

// ReadRun reads run id, its access requests and, if withProject, its
// project (paddock.RunReader), in a repeatable-read, read-only
// transaction whose BEGIN, reads and COMMIT are sent at once: one round
// trip, where View with the same reads takes five (BEGIN, each read and
// ROLLBACK, each waiting for the one before). The project is nil if it
// could not be read.
func (s *Store) ReadRun(ctx context.Context, id string, withProject bool) (r *paddock.Run, p *paddock.Project, grants []*paddock.AccessRequest, err error) {
	ctx, finish, err := s.within(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	defer finish(&err)
	b := &pgx.Batch{}
	b.Queue(`BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY`)
	b.Queue(`SELECT `+runCols+` FROM `+runFrom+` WHERE r.id = $1`, id)
	b.Queue(accessRequestsOfRun, id)
	if withProject {
		b.Queue(`SELECT `+projectCols+` FROM `+projectFrom+` WHERE p.name = (SELECT project FROM runs WHERE id = $1)`, id)
	}
	b.Queue(`COMMIT`)
	// A batch cut short leaves its connection inside the transaction; the
	// pool closes such a connection rather than hand it out again.
	br := s.pool.SendBatch(ctx, b)
	r, p, grants, err = readRunResults(br, id, withProject)
	if cerr := br.Close(); err == nil && cerr != nil {
		err = wrap("read run", cerr)
	}
	if err != nil {
		return nil, nil, nil, err
	}
	return r, p, grants, nil
}

// readRunResults reads ReadRun's batch's results, in their order.
func readRunResults(br pgx.BatchResults, id string, withProject bool) (*paddock.Run, *paddock.Project, []*paddock.AccessRequest, error) {
	if _, err := br.Exec(); err != nil {
		return nil, nil, nil, wrap("begin", err)
	}
	r, err := scanRun(br.QueryRow())
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil, nil, paddock.Errorf(paddock.CodeNotFound, "no run %q", id)
	}
	if err != nil {
		return nil, nil, nil, wrap("get run", err)
	}
	rows, err := br.Query()
	if err != nil {
		return nil, nil, nil, wrap("list access requests", err)
	}
	grants, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*paddock.AccessRequest, error) { return scanAccessRequest(row) })
	if err != nil {
		return nil, nil, nil, wrap("list access requests", err)
	}
	if len(grants) == 0 {
		grants = nil // as View's List answers
	}
	var p *paddock.Project
	if withProject {
		if p, err = scanProject(br.QueryRow()); err != nil {
			p = nil // for the caller to read again, and say why
		}
	}
	if _, err := br.Exec(); err != nil {
		return nil, nil, nil, wrap("commit", err)
	}
	return r, p, grants, nil
}
