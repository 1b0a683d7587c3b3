package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/paddock-dev/paddock"
)

// ReadRun reads run id and, as with asks, its access requests and its
// project (paddock.RunReader), in a repeatable-read, read-only
// transaction whose BEGIN, reads and COMMIT are sent at once: one round
// trip, where View with the same reads takes five (BEGIN, each read and
// ROLLBACK, each waiting for the one before). The run alone is one
// statement, its own snapshot, sent without a transaction of its own. The
// project is nil if it could not be read.
func (s *Store) ReadRun(ctx context.Context, id string, with paddock.RunWith) (r *paddock.Run, p *paddock.Project, grants []*paddock.AccessRequest, err error) {
	ctx, finish, err := s.within(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	defer finish(&err)
	b := &pgx.Batch{}
	tx := with.Grants || with.Project
	if tx {
		b.Queue(`BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY`)
	}
	b.Queue(`SELECT `+runCols+` FROM `+runFrom+` WHERE r.id = $1`, id)
	if with.Grants {
		b.Queue(accessRequestsOfRun, id)
	}
	if with.Project {
		b.Queue(`SELECT `+projectCols+` FROM `+projectFrom+` WHERE p.name = (SELECT project FROM runs WHERE id = $1)`, id)
	}
	if tx {
		b.Queue(`COMMIT`)
	}
	// A batch cut short leaves its connection inside the transaction; the
	// pool closes such a connection rather than hand it out again.
	br := s.pool.SendBatch(ctx, b)
	r, p, grants, err = readRunResults(br, id, with, tx)
	if cerr := br.Close(); err == nil && cerr != nil {
		err = wrap("read run", cerr)
	}
	if err != nil {
		return nil, nil, nil, err
	}
	return r, p, grants, nil
}

// readRunResults reads ReadRun's batch's results, in their order (tx: it
// begins and commits a transaction).
func readRunResults(br pgx.BatchResults, id string, with paddock.RunWith, tx bool) (*paddock.Run, *paddock.Project, []*paddock.AccessRequest, error) {
	if tx {
		if _, err := br.Exec(); err != nil {
			return nil, nil, nil, wrap("begin", err)
		}
	}
	r, err := scanRun(br.QueryRow())
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil, nil, paddock.Errorf(paddock.CodeNotFound, "no run %q", id)
	}
	if err != nil {
		return nil, nil, nil, wrap("get run", err)
	}
	var grants []*paddock.AccessRequest
	if with.Grants {
		rows, err := br.Query()
		if err != nil {
			return nil, nil, nil, wrap("list access requests", err)
		}
		grants, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (*paddock.AccessRequest, error) { return scanAccessRequest(row) })
		if err != nil {
			return nil, nil, nil, wrap("list access requests", err)
		}
		if len(grants) == 0 {
			grants = nil // as View's List answers
		}
	}
	var p *paddock.Project
	if with.Project {
		if p, err = scanProject(br.QueryRow()); err != nil {
			p = nil // for the caller to read again, and say why
		}
	}
	if tx {
		if _, err := br.Exec(); err != nil {
			return nil, nil, nil, wrap("commit", err)
		}
	}
	return r, p, grants, nil
}
