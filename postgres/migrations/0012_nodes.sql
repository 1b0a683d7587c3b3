-- paddock state, version 12, PostgreSQL only: several daemons (nodes)
-- share this database. SQLite has no nodes and no version 12: its next
-- migration takes 13, so that the two schemas keep one numbering.
--
-- A node renews its lease (lease_until) while it lives; epoch, a new value
-- from paddock_node_epoch each time it joins, is its fencing token. Every
-- write of a node first takes its own row FOR SHARE and checks epoch,
-- state and lease, so that a node another has marked lost (which takes the
-- row FOR UPDATE) can write nothing more.
CREATE SEQUENCE paddock_node_epoch;
CREATE TABLE paddock_nodes (
	id           text COLLATE "C" PRIMARY KEY,
	home         text NOT NULL,          -- the state directory's key: a second daemon with the same id is refused
	epoch        bigint NOT NULL,
	address      text NOT NULL,
	capacity     integer NOT NULL,
	state        text NOT NULL,          -- alive, lost, left
	started_at   timestamptz NOT NULL,
	heartbeat_at timestamptz NOT NULL,
	lease_until  timestamptz NOT NULL
);

-- The node that holds a run's workspace; NULL for runs made before nodes.
ALTER TABLE runs ADD COLUMN node text COLLATE "C";
CREATE INDEX runs_node ON runs(node);

-- The secret nodes authenticate forwarded calls with: 32 random bytes
-- the first node to join makes (crypto/rand), hex.
CREATE TABLE paddock_cluster (
	one    boolean PRIMARY KEY DEFAULT true CHECK (one),
	secret text NOT NULL
);

-- A run's last checkpoint: its change set, for an adoption on another node.
CREATE TABLE paddock_checkpoints (
	run_id        text COLLATE "C" PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,
	node          text NOT NULL,
	base_revision text NOT NULL,
	hash          text NOT NULL,
	entries       integer NOT NULL,
	taken_at      timestamptz NOT NULL,
	content       bytea NOT NULL
);

-- A place a node holds for a run being made on it (Place): counted with
-- its live runs until the run is made (CreateRun takes it back) or it
-- expires, so that creates placed at once do not all pick the same node.
CREATE TABLE paddock_reservations (
	id         bigserial PRIMARY KEY,
	node       text COLLATE "C" NOT NULL,
	project    text COLLATE "C" NOT NULL,
	expires_at timestamptz NOT NULL
);
CREATE INDEX paddock_reservations_node ON paddock_reservations(node);
