package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/paddock-dev/paddock"
)

// eventsChannel is the LISTEN/NOTIFY channel AppendEvent notifies on, with
// the run's id as the payload.
const eventsChannel = "paddock_events"

// NodeConfig is how a daemon joins as a node.
type NodeConfig struct {
	// ID names the node; it stays the same across restarts (the daemon
	// keeps it in its state directory).
	ID string
	// Home is the state directory's own key: a second daemon joining under
	// an ID whose node is alive with another Home is refused, while this
	// daemon restarted (the same Home) takes its node back at once.
	Home string
	// Address is where other nodes forward calls to (http://HOST:PORT).
	Address string
	// Capacity is how many runs with a live workspace the node takes.
	Capacity int
	// Lease is how long the node counts as alive after its last renewal.
	Lease time.Duration
}

// joined is a node that joined: its id, fencing token and lease.
type joined struct {
	cfg   NodeConfig
	epoch int64
	clock *leaseClock
	// lost is set once the database refused this node's lease (fence,
	// Renew): from then on its calls are refused without asking.
	lost atomic.Bool
}

func (s *Store) nodeID() string {
	if n := s.node.Load(); n != nil {
		return n.cfg.ID
	}
	return ""
}

// ErrNodeTaken is Join's error when a node of the same id belongs to
// another state directory: alive, or holding runs.
var ErrNodeTaken = errors.New("postgres: a node of this id belongs to another state directory")

// Join registers this daemon as node c.ID, alive with a lease of c.Lease
// and a new epoch, and makes the shared secret if no node has yet. From
// then on every Update is fenced by the node's lease, runs are made on
// this node, and a Tx lists this node's workspaces and running jobs only.
func (s *Store) Join(ctx context.Context, c NodeConfig) (paddock.Node, error) {
	if c.ID == "" || c.Home == "" || c.Address == "" || c.Lease <= 0 {
		return paddock.Node{}, errors.New("postgres: a node needs an id, a home, an address and a lease")
	}
	if c.Capacity <= 0 {
		return paddock.Node{}, errors.New("postgres: a node's capacity must be at least 1")
	}
	var secret [32]byte
	rand.Read(secret[:])
	var n paddock.Node
	sent := time.Now()
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO paddock_cluster (secret) VALUES ($1) ON CONFLICT DO NOTHING`, hex.EncodeToString(secret[:])); err != nil {
			return err
		}
		var home, state string
		var alive bool
		err := tx.QueryRow(ctx, `SELECT home, state, lease_until > now() FROM paddock_nodes WHERE id = $1 FOR UPDATE`, c.ID).Scan(&home, &state, &alive)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
		case err != nil:
			return err
		case state == string(paddock.NodeAlive) && alive && home != c.Home:
			return fmt.Errorf("%w: node %s is alive", ErrNodeTaken, c.ID)
		case home != c.Home:
			// Another state directory under a stopped or lost node's id
			// would take runs whose workspaces are on that node's disk.
			var runs int
			if err := tx.QueryRow(ctx, `SELECT count(*) FROM runs r JOIN workspaces w ON w.run_id = r.id
				WHERE r.node = $1 AND r.removed_at IS NULL AND w.state = ANY($2)`, c.ID, liveStates).Scan(&runs); err != nil {
				return err
			}
			if runs > 0 {
				return fmt.Errorf("%w: node %s, %s, still holds %d runs whose workspaces are in its own state directory (adopt them on another node, or start that node again)",
					ErrNodeTaken, c.ID, state, runs)
			}
		}
		// Runs made before nodes existed (by the one daemon this database
		// had) are the first node's ever to join: it recovers and collects
		// them, so that daemon must be the first node started.
		if _, err := tx.Exec(ctx, `UPDATE runs SET node = $1 WHERE node IS NULL AND NOT EXISTS (SELECT 1 FROM paddock_nodes)`, c.ID); err != nil {
			return err
		}
		ms := c.Lease.Milliseconds()
		return tx.QueryRow(ctx, `INSERT INTO paddock_nodes (id, home, epoch, address, capacity, state, started_at, heartbeat_at, lease_until)
			VALUES ($1, $2, nextval('paddock_node_epoch'), $3, $4, 'alive', now(), now(), now() + $5 * interval '1 millisecond')
			ON CONFLICT (id) DO UPDATE SET home = excluded.home, epoch = excluded.epoch, address = excluded.address,
				capacity = excluded.capacity, state = 'alive', started_at = now(), heartbeat_at = now(), lease_until = excluded.lease_until
			RETURNING `+nodeCols+`, 0`, c.ID, c.Home, c.Address, c.Capacity, ms).Scan(nodeDest(&n)...)
	})
	if err != nil {
		if errors.Is(err, ErrNodeTaken) {
			return paddock.Node{}, err
		}
		return paddock.Node{}, fmt.Errorf("postgres: join as node %s: %w", c.ID, err)
	}
	clock := newLeaseClock(c.Lease)
	clock.renewed(sent)
	if old := s.node.Swap(&joined{cfg: c, epoch: n.Epoch, clock: clock}); old != nil {
		old.clock.stop()
	}
	return n, nil
}

const nodeCols = `id, epoch, address, capacity, state, started_at, heartbeat_at, lease_until`

func nodeDest(n *paddock.Node) []any {
	return []any{&n.ID, &n.Epoch, &n.Address, &n.Capacity, &n.State, &n.StartedAt, &n.HeartbeatAt, &n.LeaseUntil, &n.LiveRuns}
}

// fenced is the error of a write by a node that lost its lease.
func fenced(id string) error {
	return &paddock.Error{Code: paddock.CodeNodeLost,
		Message: "node " + id + " lost its lease (another node may have marked it lost and taken its runs)",
		Err:     paddock.ErrFenced}
}

// fenceCode is the SQLSTATE paddock_fence raises for a node that may not
// write (migrations/0016_fence.sql).
const fenceCode = "PF001"

// fenceBegin is the BEGIN of a write transaction of this node with its
// fence in the same message, and the node it fences: the simple protocol
// takes both statements at once, so the fence costs no round trip of its
// own. With no node joined, or one whose id is not a valid one
// (paddock.ValidNodeID: written into the statement, it needs no quoting),
// it is "" and nil, and Update fences with a statement of its own (fence).
func (s *Store) fenceBegin() (string, *joined) {
	n := s.node.Load()
	if n == nil || !paddock.ValidNodeID(n.cfg.ID) {
		return "", nil
	}
	return fmt.Sprintf("BEGIN; SELECT paddock_fence('%s', %d)", n.cfg.ID, n.epoch), n
}

// fence checks, first thing in a write transaction, that this node still
// holds its lease. The row stays locked FOR KEY SHARE until the
// transaction ends, so that the node marking it lost (FOR UPDATE) waits
// for the writes under way, and none after it commits.
func (s *Store) fence(ctx context.Context, tx pgx.Tx) error {
	n := s.node.Load()
	if n == nil {
		return nil
	}
	var one int
	err := tx.QueryRow(ctx, `SELECT 1 FROM paddock_nodes WHERE id = $1 AND epoch = $2 AND state = 'alive' AND lease_until > now() FOR KEY SHARE`,
		n.cfg.ID, n.epoch).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		n.lost.Store(true)
		return fenced(n.cfg.ID)
	}
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return wrap("check the node's lease", err)
	}
	return nil
}

// Self is this node, as it joined.
func (s *Store) Self() paddock.Node {
	n := s.node.Load()
	if n == nil {
		return paddock.Node{}
	}
	return paddock.Node{ID: n.cfg.ID, Epoch: n.epoch, Address: n.cfg.Address, Capacity: n.cfg.Capacity, State: paddock.NodeAlive}
}

// Renew pushes this node's lease on, on a connection of its own (not one
// of the pool the node's work waits for). A node marked lost, or joined again
// by a newer epoch, is refused with ErrFenced (code node_lost): it must
// stop, since its runs may be another's now. A lease that ran out without
// another node noticing is renewed.
//
// A renewal may take two leases: cut short sooner, on a slow or lossy
// link, it would fail when it could still have held the lease, or given
// it back after the node's clock ran out, and its connection would be
// closed with it (a new one costs more round trips, each as likely to be
// lost, a lost SYN alone a second). The node's clock, not this, bounds
// how long the node goes on without a renewal: the lease counts from
// when the renewal was sent on its connection, not from when the
// connection was asked for (the database's now() is later than that).
func (s *Store) Renew(ctx context.Context) error {
	n := s.node.Load()
	if n == nil {
		return errors.New("postgres: this store has not joined as a node")
	}
	ctx, cancel := context.WithTimeout(ctx, 2*n.cfg.Lease)
	defer cancel()
	conn, err := s.lease.Acquire(ctx)
	if err != nil {
		return wrap("renew the node's lease", err)
	}
	defer conn.Release()
	sent := time.Now()
	// A renewal that lands more than half a lease after the one before
	// (the SET sees the row as it was) starts the node's grace: it marks
	// no other node lost for a lease (see Reap).
	tag, err := conn.Exec(ctx, `UPDATE paddock_nodes SET
			grace_until = CASE WHEN heartbeat_at < now() - $4 * interval '1 millisecond'
				THEN now() + $3 * interval '1 millisecond' ELSE grace_until END,
			heartbeat_at = now(), lease_until = now() + $3 * interval '1 millisecond'
		WHERE id = $1 AND epoch = $2 AND state = 'alive'`, n.cfg.ID, n.epoch, n.cfg.Lease.Milliseconds(), (n.cfg.Lease / 2).Milliseconds())
	if err != nil {
		return wrap("renew the node's lease", err)
	}
	if tag.RowsAffected() == 0 {
		n.lost.Store(true)
		return fenced(n.cfg.ID)
	}
	n.clock.renewed(sent)
	return nil
}

// Leave marks this node as stopped cleanly; its runs stay its own (a
// restart takes them back) unless another node adopts them.
func (s *Store) Leave(ctx context.Context) (err error) {
	n := s.node.Load()
	if n == nil {
		return nil
	}
	defer n.clock.stop()
	ctx, finish, err := s.within(ctx)
	if err != nil {
		return err
	}
	defer finish(&err)
	_, err = s.pool.Exec(ctx, `UPDATE paddock_nodes SET state = 'left', lease_until = now() WHERE id = $1 AND epoch = $2 AND state = 'alive'`,
		n.cfg.ID, n.epoch)
	return wrap("leave", err)
}

// Nodes lists every node, by id, with the runs it holds live.
func (s *Store) Nodes(ctx context.Context) (_ []paddock.Node, err error) {
	ctx, finish, err := s.within(ctx)
	if err != nil {
		return nil, err
	}
	defer finish(&err)
	rows, err := s.pool.Query(ctx, `SELECT `+nodeCols+`, (SELECT count(*) FROM runs r JOIN workspaces w ON w.run_id = r.id
		WHERE r.node = n.id AND r.removed_at IS NULL AND w.state = ANY($1)) FROM paddock_nodes n ORDER BY id`, liveStates)
	if err != nil {
		return nil, wrap("list nodes", err)
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (paddock.Node, error) {
		var n paddock.Node
		err := row.Scan(nodeDest(&n)...)
		return n, err
	})
}

// liveStates are the workspace states that count against a node's capacity.
var liveStates = []string{string(paddock.StateRequested), string(paddock.StatePreparing), string(paddock.StateReady),
	string(paddock.StateActive), string(paddock.StateCheckpointed)}

// Secret is the secret nodes authenticate the calls they forward with.
func (s *Store) Secret(ctx context.Context) (_ string, err error) {
	ctx, finish, err := s.within(ctx)
	if err != nil {
		return "", err
	}
	defer finish(&err)
	var secret string
	if err := s.pool.QueryRow(ctx, `SELECT secret FROM paddock_cluster`).Scan(&secret); err != nil {
		return "", wrap("read the cluster's secret", err)
	}
	return secret, nil
}

// Locate returns the node that holds run id; a zero Node for a run made
// before nodes, or CodeNotFound for no run.
func (s *Store) Locate(ctx context.Context, id string) (_ paddock.Node, err error) {
	ctx, finish, err := s.within(ctx)
	if err != nil {
		return paddock.Node{}, err
	}
	defer finish(&err)
	var n paddock.Node
	var node, addr, state *string
	var epoch *int64
	err = s.pool.QueryRow(ctx, `SELECT r.node, n.address, n.state, n.epoch FROM runs r LEFT JOIN paddock_nodes n ON n.id = r.node WHERE r.id = $1`, id).
		Scan(&node, &addr, &state, &epoch)
	if errors.Is(err, pgx.ErrNoRows) {
		return n, paddock.Errorf(paddock.CodeNotFound, "no run %q", id)
	}
	if err != nil {
		return n, wrap("locate run", err)
	}
	if node != nil {
		n.ID = *node
	}
	if addr != nil {
		n.Address, n.State, n.Epoch = *addr, paddock.NodeState(*state), *epoch
	}
	return n, nil
}

// Place picks the node for a new run of project: among the live nodes
// with room (fewer live runs and places held than their capacity), one
// that has made runs of the project before (its base snapshots are warm),
// then the one with the most room, then by id; and holds a place there
// for reservationTerm, which the node's CreateRun takes back. Places are
// taken one at a time (a transaction-level advisory lock), so that creates
// placed at once spread over the nodes. CodeBusy when every node is full.
func (s *Store) Place(ctx context.Context, project string) (_ paddock.Node, _ int64, err error) {
	ctx, finish, err := s.within(ctx)
	if err != nil {
		return paddock.Node{}, 0, err
	}
	defer finish(&err)
	var n paddock.Node
	var held int64
	noProject := errors.New("no project")
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM projects WHERE name = $1)`, project).Scan(&exists); err != nil {
			return err
		}
		if !exists {
			return noProject
		}
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, placementLock); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM paddock_reservations WHERE expires_at < now()`); err != nil {
			return err
		}
		err := tx.QueryRow(ctx, `WITH load AS (
				SELECT n.id,
					(SELECT count(*) FROM runs r JOIN workspaces w ON w.run_id = r.id
						WHERE r.node = n.id AND r.removed_at IS NULL AND w.state = ANY($1))
					+ (SELECT count(*) FROM paddock_reservations v WHERE v.node = n.id) AS live,
					EXISTS (SELECT 1 FROM runs r WHERE r.node = n.id AND r.project = $2 AND r.removed_at IS NULL) AS warm
				FROM paddock_nodes n WHERE n.state = 'alive' AND n.lease_until > now())
			SELECT `+prefixed("n.", nodeCols)+`, l.live FROM paddock_nodes n JOIN load l ON l.id = n.id
			WHERE l.live < n.capacity
			ORDER BY l.warm DESC, n.capacity - l.live DESC, n.id LIMIT 1`, liveStates, project).Scan(nodeDest(&n)...)
		if err != nil {
			return err
		}
		return tx.QueryRow(ctx, `INSERT INTO paddock_reservations (node, project, expires_at) VALUES ($1, $2, now() + $3 * interval '1 millisecond')
			RETURNING id`, n.ID, project, reservationTerm.Milliseconds()).Scan(&held)
	})
	switch {
	case errors.Is(err, noProject):
		return n, 0, paddock.Errorf(paddock.CodeNotFound, "no project named %q", project)
	case errors.Is(err, pgx.ErrNoRows):
		return n, 0, paddock.Errorf(paddock.CodeBusy, "every node is at its capacity of live runs; reject, retain or remove runs, or add a node")
	case err != nil:
		return n, 0, wrap("place a run", err)
	}
	return n, held, nil
}

// Unplace gives back a place Place held, when no run was made on it.
func (s *Store) Unplace(ctx context.Context, held int64) (err error) {
	ctx, finish, err := s.within(ctx)
	if err != nil {
		return err
	}
	defer finish(&err)
	_, err = s.pool.Exec(ctx, `DELETE FROM paddock_reservations WHERE id = $1`, held)
	return wrap("give a place back", err)
}

// placementLock is the advisory lock Place takes: "paddock2" in ASCII.
const placementLock int64 = 0x7061646f636b32

// reservationTerm is how long a place Place holds lasts if no run is made
// on it (the call failed, or was refused).
var reservationTerm = 30 * time.Second

// prefixed is cols, a list of columns, each prefixed with p.
func prefixed(p, cols string) string {
	list := strings.Split(cols, ",")
	for i, c := range list {
		list[i] = p + strings.TrimSpace(c)
	}
	return strings.Join(list, ", ")
}

// interruptJobs interrupts run's running jobs, whose node is gone (their
// leases with them), each with a job.interrupted event, and returns their
// ids.
func (t *Tx) interruptJobs(ctx context.Context, run, node, reason string) ([]string, error) {
	jobs, err := t.Jobs(ctx, run, paddock.JobRunning)
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, j := range jobs {
		prev := j.Owner
		j.State, j.Reason, j.EndedAt, j.LeaseUntil = paddock.JobInterrupted, reason, time.Now().UTC(), time.Time{}
		if err := t.UpdateJob(ctx, j); err != nil {
			return nil, err
		}
		if _, err := t.AppendEvent(ctx, run, paddock.EventJobInterrupted, map[string]string{"job": j.ID, "previous_owner": prev, "node": node}); err != nil {
			return nil, err
		}
		ids = append(ids, j.ID)
	}
	return ids, nil
}

// Lost is a node Reap marked lost, and what it found of the node's runs.
type Lost struct {
	Node paddock.Node
	Runs []string // the runs with a workspace it held, reported node_lost
	Jobs []string // their running jobs, interrupted
}

// Reap marks lost every alive node whose lease has run out, each in a
// transaction of its own, taking its row FOR UPDATE SKIP LOCKED (so that
// two nodes reaping at once share the work, and a node's writes under way
// finish first). A lost node's runs get run.node_lost, their running jobs
// become interrupted (their leases with them) and the project locks they
// hold are released. The reaping node's own lease fences the transaction.
//
// It marks none unless this node is steady (leaseClock.steady): its own
// last renewal went through less than half a lease ago, and not after a
// gap of more than half a lease less than a lease ago (those between
// failed or hung; renewals go every third of a lease). A gap means the
// store was likely out of reach for every node (it restarted, was failed
// over, or its network failed), and the others' leases ran out with this
// one's; they get a lease to renew theirs first, or the first node back
// would take every other node's runs. The clock that says so is the one
// this node's writes are let through by; it is asked before each node's
// transaction and again once the node is found, before it is marked. The
// database asks too: the expired node is found only while this node's
// own last renewal reached it less than half a lease before (its
// heartbeat), so that a transaction held up in an outage (a connection
// awaited, packets retransmitted) finds nothing when it gets through; and
// only while this node's grace, which the database starts when a renewal
// lands over half a lease after the one before (Renew), is over: a reap
// sent after that renewal landed and before its answer reached the clock
// finds nothing either.
func (s *Store) Reap(ctx context.Context) ([]Lost, error) {
	self := s.node.Load()
	var out []Lost
	for {
		if self != nil && !self.clock.steady() {
			return out, nil
		}
		var l *Lost
		err := s.Update(ctx, func(ptx paddock.Tx) error {
			tx := ptx.(*Tx)
			var n paddock.Node
			where, args := "", []any(nil)
			if self != nil {
				where = `AND EXISTS (SELECT 1 FROM paddock_nodes me WHERE me.id = $1 AND me.epoch = $2
					AND me.heartbeat_at > clock_timestamp() - $3 * interval '1 millisecond'
					AND me.grace_until < clock_timestamp())`
				args = []any{self.cfg.ID, self.epoch, (self.cfg.Lease / 2).Milliseconds()}
			}
			err := tx.tx.QueryRow(ctx, `SELECT `+nodeCols+`, 0 FROM paddock_nodes
				WHERE state = 'alive' AND lease_until < now() `+where+`
				ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED`, args...).Scan(nodeDest(&n)...)
			if errors.Is(err, pgx.ErrNoRows) {
				return nil
			}
			if err != nil {
				return wrap("find expired nodes", err)
			}
			if self != nil && !self.clock.steady() {
				return errNotSteady // rolled back: judged by a node that lost touch meanwhile
			}
			if _, err := tx.tx.Exec(ctx, `UPDATE paddock_nodes SET state = 'lost' WHERE id = $1`, n.ID); err != nil {
				return wrap("mark node lost", err)
			}
			n.State = paddock.NodeLost
			l = &Lost{Node: n}
			rows, err := tx.tx.Query(ctx, `SELECT r.id FROM runs r JOIN workspaces w ON w.run_id = r.id
				WHERE r.node = $1 AND r.removed_at IS NULL AND w.state NOT IN ('cleaned', 'orphaned') ORDER BY r.id`, n.ID)
			if err != nil {
				return wrap("list a lost node's runs", err)
			}
			if l.Runs, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
				return wrap("list a lost node's runs", err)
			}
			for _, run := range l.Runs {
				if _, err := tx.AppendEvent(ctx, run, paddock.EventNodeLost, map[string]any{"node": n.ID, "epoch": n.Epoch, "by": tx.node}); err != nil {
					return err
				}
				jobs, err := tx.interruptJobs(ctx, run, n.ID, lostJobReason[0]+n.ID+lostJobReason[1])
				if err != nil {
					return err
				}
				l.Jobs = append(l.Jobs, jobs...)
				var project string
				if err := tx.tx.QueryRow(ctx, `SELECT project FROM runs WHERE id = $1`, run).Scan(&project); err != nil {
					return wrap("read a run's project", err)
				}
				released, err := tx.ReleaseLock(ctx, project, run)
				if err != nil {
					return err
				}
				if released {
					if _, err := tx.AppendEvent(ctx, run, paddock.EventLockReleased, map[string]string{"project": project, "node": n.ID}); err != nil {
						return err
					}
				}
			}
			return nil
		})
		if errors.Is(err, errNotSteady) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		if l == nil {
			return out, nil
		}
		out = append(out, *l)
	}
}

// errNotSteady rolls back a reap whose node stopped being steady while
// it found an expired node.
var errNotSteady = errors.New("postgres: this node is not steady enough to judge others' leases")

// Listen calls fn with a run's id after each transaction that appended
// events to it commits, on any node, until ctx ends; it reconnects after
// a lost connection (and calls fn with "" then: anything may have been
// missed). It returns ctx's error.
func (s *Store) Listen(ctx context.Context, fn func(runID string)) error {
	for ctx.Err() == nil {
		err := s.listenOnce(ctx, fn)
		if ctx.Err() != nil {
			break
		}
		fn("")
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
		_ = err
	}
	return ctx.Err()
}

func (s *Store) listenOnce(ctx context.Context, fn func(string)) (err error) {
	ctx, finish, err := s.within(ctx)
	if err != nil {
		return err
	}
	defer finish(&err)
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	// The connection is LISTENing: it goes back to no pool.
	pc := conn.Hijack()
	defer pc.Close(context.WithoutCancel(ctx))
	if _, err := pc.Exec(ctx, `LISTEN `+eventsChannel); err != nil {
		return err
	}
	fn("") // what came before the LISTEN
	for {
		note, err := pc.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		fn(note.Payload)
	}
}

// SaveCheckpoint stores cp as its run's last checkpoint.
func (s *Store) SaveCheckpoint(ctx context.Context, cp *paddock.RunCheckpoint) error {
	return s.Update(ctx, func(ptx paddock.Tx) error {
		tx := ptx.(*Tx)
		tag, err := tx.tx.Exec(ctx, `INSERT INTO paddock_checkpoints (run_id, node, base_revision, hash, entries, taken_at, content)
			SELECT $1, $2, $3, $4, $5, $6, $7 WHERE EXISTS (SELECT 1 FROM runs WHERE id = $1 AND node = $2)
			ON CONFLICT (run_id) DO UPDATE SET node = excluded.node, base_revision = excluded.base_revision, hash = excluded.hash,
				entries = excluded.entries, taken_at = excluded.taken_at, content = excluded.content`,
			cp.RunID, tx.node, cp.BaseRevision, cp.Hash, cp.Entries, cp.TakenAt.UTC(), cp.Content)
		if err != nil {
			return wrap("save checkpoint", err)
		}
		if tag.RowsAffected() == 0 {
			return paddock.Errorf(paddock.CodeConflict, "run %s is not on node %s; its checkpoint is not this node's to store", cp.RunID, tx.node)
		}
		cp.Node = tx.node
		return nil
	})
}

// LoadCheckpoint returns a run's last checkpoint.
func (s *Store) LoadCheckpoint(ctx context.Context, runID string) (_ *paddock.RunCheckpoint, err error) {
	ctx, finish, err := s.within(ctx)
	if err != nil {
		return nil, err
	}
	defer finish(&err)
	cp := &paddock.RunCheckpoint{RunID: runID}
	err = s.pool.QueryRow(ctx, `SELECT node, base_revision, hash, entries, taken_at, content FROM paddock_checkpoints WHERE run_id = $1`, runID).
		Scan(&cp.Node, &cp.BaseRevision, &cp.Hash, &cp.Entries, &cp.TakenAt, &cp.Content)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, paddock.Errorf(paddock.CodeNotFound, "run %s has no checkpoint in the shared store", runID)
	}
	if err != nil {
		return nil, wrap("load checkpoint", err)
	}
	return cp, nil
}

// TakeRun moves run id to this node when the node holding it is not alive
// (lost, or left), and runs fn in the same transaction.
func (s *Store) TakeRun(ctx context.Context, id string, fn func(paddock.Tx) error) (string, error) {
	var from string
	err := s.Update(ctx, func(ptx paddock.Tx) error {
		tx := ptx.(*Tx)
		var node, state *string
		err := tx.tx.QueryRow(ctx, `SELECT node FROM runs WHERE id = $1 FOR UPDATE`, id).Scan(&node)
		if errors.Is(err, pgx.ErrNoRows) {
			return paddock.Errorf(paddock.CodeNotFound, "no run %q", id)
		}
		if err != nil {
			return wrap("take run", err)
		}
		if node != nil {
			from = *node
			// The holder's row, locked until the take commits: a Join of
			// that node (which takes it FOR UPDATE) waits for the take and
			// then finds the run gone from its workspaces; a Join that
			// came first is seen here as alive. Read without the lock, the
			// state could be stale by the commit, and the rejoined node
			// and this one would both hold the run.
			err := tx.tx.QueryRow(ctx, `SELECT state FROM paddock_nodes WHERE id = $1 FOR SHARE`, from).Scan(&state)
			if err != nil && !errors.Is(err, pgx.ErrNoRows) {
				return wrap("take run", err)
			}
		}
		switch {
		case from == tx.node:
			return paddock.Errorf(paddock.CodeConflict, "run %s is on this node (%s) already", id, tx.node)
		case state != nil && *state == string(paddock.NodeAlive):
			return paddock.Errorf(paddock.CodeConflict, "run %s is on node %s, which is alive: only a lost or stopped node's runs are adopted", id, from)
		}
		if _, err := tx.tx.Exec(ctx, `UPDATE runs SET node = $1 WHERE id = $2`, tx.node, id); err != nil {
			return wrap("take run", err)
		}
		// A job the old node left running (it stopped without recording
		// the job's end) is interrupted, as a reaped node's are: the run
		// would stay busy for good.
		if _, err := tx.interruptJobs(ctx, id, from, "its node ("+from+") stopped"); err != nil {
			return err
		}
		return fn(tx)
	})
	return from, err
}

// Adoptable lists the runs of lost nodes that an adoption could restore
// (live, not a handed-over directory, with a checkpoint), those most
// likely in use first, so that an agent at work waits the least: a run
// whose job was under way when its node was lost; then active runs, by
// their last activity, newest first; then active runs that wait on a
// review of what they submitted; then ready ones, then the rest (a
// checkpointed run's session was detached); each group by its last
// activity, newest first, then oldest made first.
//
// A run's last activity is the time of its last event that a call of its
// agent or of a person made (activityEvents), not one an adoption made
// (the restore's own tool calls, between run.adopted and the
// workspace.resumed that ends it) nor one the loss made (run.node_lost,
// job.interrupted): read backwards on the events' primary key, it stops
// at the first it finds.
func (s *Store) Adoptable(ctx context.Context) (_ []string, err error) {
	ctx, finish, err := s.within(ctx)
	if err != nil {
		return nil, err
	}
	defer finish(&err)
	rows, err := s.pool.Query(ctx, `SELECT r.id FROM runs r JOIN paddock_nodes n ON n.id = r.node JOIN workspaces w ON w.run_id = r.id
		LEFT JOIN LATERAL (WITH RECURSIVE back (seq, time, type, adopting) AS (
				SELECT e.seq, e.time, e.type, `+adoptingStep+` FROM events e WHERE e.run_id = r.id AND e.seq = r.last_seq
				UNION ALL
				SELECT e.seq, e.time, e.type, b.adopting + `+adoptingStep+` FROM back b JOIN events e ON e.run_id = r.id AND e.seq = b.seq - 1
				WHERE NOT (b.adopting <= 0 AND b.type = ANY($2)))
			SELECT time, type FROM back WHERE adopting <= 0 AND type = ANY($2)) act ON true
		LEFT JOIN LATERAL (SELECT j.state, j.reason FROM jobs j WHERE j.run_id = r.id ORDER BY j.created_at DESC, j.id DESC LIMIT 1) job ON true
		WHERE n.state = 'lost' AND r.removed_at IS NULL AND w.state = ANY($1) AND w.kind <> 'operator_dir'
		AND EXISTS (SELECT 1 FROM paddock_checkpoints c WHERE c.run_id = r.id)
		ORDER BY CASE
				WHEN job.state = 'running' OR (job.state = 'interrupted' AND job.reason = ($4 || r.node || $5)) THEN 0
				WHEN w.state = 'active' AND coalesce(act.type, '') <> ALL($3) THEN 1
				WHEN w.state = 'active' THEN 2
				WHEN w.state = 'ready' THEN 3
				ELSE 4 END,
			act.time DESC NULLS LAST, r.created_at, r.id
		LIMIT 100`, liveStates, activityEvents, waitingEvents, lostJobReason[0], lostJobReason[1])
	if err != nil {
		return nil, wrap("list adoptable runs", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return ids, wrap("list adoptable runs", err)
}

// activityEvents are the events a call of a run's agent, or of a person,
// makes: what says a run is in use (Adoptable). Not workspace.checkpoint,
// which a daemon's stop records on every active run.
var activityEvents = []string{paddock.EventRunCreated, paddock.EventRunForked, paddock.EventImported, paddock.EventBootstrapped,
	paddock.EventRunDriven, paddock.EventToolCall, paddock.EventInbox, paddock.EventAccessRequested, paddock.EventAccessGranted,
	paddock.EventAccessDenied, paddock.EventVerified, paddock.EventPlanned, paddock.EventExec, paddock.EventNetwork,
	paddock.EventJobStarted, paddock.EventJobFinished, paddock.EventResumed,
	paddock.EventSubmitted, paddock.EventReviewStarted, paddock.EventFlowState, paddock.EventApproved, paddock.EventApplied,
	paddock.EventUndone, paddock.EventApplyFailed, paddock.EventQueueAdded, paddock.EventQueueTesting, paddock.EventQueueReturned,
	paddock.EventQueueLanded, paddock.EventQueueRemoved, paddock.EventQueueUndone}

// waitingEvents are those of activityEvents after which a run waits on
// a person (its change set's review, approval or landing), its agent done
// for now.
var waitingEvents = []string{paddock.EventSubmitted, paddock.EventReviewStarted, paddock.EventApproved, paddock.EventApplied,
	paddock.EventQueueAdded, paddock.EventQueueTesting, paddock.EventQueueLanded}

// adoptingStep is what an event e adds to the adoptions a run's events,
// read backwards, are inside of: the end of one (the workspace.resumed
// that says adopted, or run.adoption_failed) opens it, its run.adopted
// closes it.
const adoptingStep = `(CASE WHEN e.type = 'run.adopted' THEN -1
	WHEN e.type = 'run.adoption_failed' OR e.type = 'workspace.resumed' AND e.data::jsonb ? 'adopted' THEN 1 ELSE 0 END)`

// lostJobReason is the reason Reap gives a job it interrupts, before and
// after the lost node's id.
var lostJobReason = [2]string{"its node (", ") was lost"}

// Room is how many more live runs this node takes: its capacity less its
// live runs and the places held on it.
func (s *Store) Room(ctx context.Context) (_ int, err error) {
	n := s.node.Load()
	if n == nil {
		return 0, errors.New("postgres: this store has not joined as a node")
	}
	ctx, finish, err := s.within(ctx)
	if err != nil {
		return 0, err
	}
	defer finish(&err)
	var live int
	err = s.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM runs r JOIN workspaces w ON w.run_id = r.id
			WHERE r.node = $1 AND r.removed_at IS NULL AND w.state = ANY($2))
		+ (SELECT count(*) FROM paddock_reservations v WHERE v.node = $1 AND v.expires_at > now())`, n.cfg.ID, liveStates).Scan(&live)
	if err != nil {
		return 0, wrap("room", err)
	}
	return n.cfg.Capacity - live, nil
}

// ReleaseRun gives run id, this node's, back to node to (an adoption that
// failed), and runs fn in the same transaction.
func (s *Store) ReleaseRun(ctx context.Context, id, to string, fn func(paddock.Tx) error) error {
	return s.Update(ctx, func(ptx paddock.Tx) error {
		tx := ptx.(*Tx)
		tag, err := tx.tx.Exec(ctx, `UPDATE runs SET node = $1 WHERE id = $2 AND node = $3`, to, id, tx.node)
		if err != nil {
			return wrap("release run", err)
		}
		if tag.RowsAffected() == 0 {
			return paddock.Errorf(paddock.CodeConflict, "run %s is not on this node (%s)", id, tx.node)
		}
		return fn(tx)
	})
}

var _ paddock.Cluster = (*Store)(nil)
