-- paddock state, version 16, PostgreSQL only (SQLite has no nodes and no
-- version 16: its next migration takes 17, so that the two schemas keep
-- one numbering).
--
-- A node's write transaction is fenced in one statement sent with its
-- BEGIN (postgres.Store.Update): the node's own row taken FOR KEY SHARE and
-- its epoch, state and lease checked, as before, but with no round trip of
-- its own. A node that may not write gets SQLSTATE PF001, and its
-- transaction is aborted before anything of it runs.
CREATE FUNCTION paddock_fence(node_id text, node_epoch bigint) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
	PERFORM 1 FROM paddock_nodes
		WHERE id = node_id AND epoch = node_epoch AND state = 'alive' AND lease_until > now()
		FOR KEY SHARE;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'node % (epoch %) may not write: its lease is gone or another node marked it lost', node_id, node_epoch
			USING ERRCODE = 'PF001';
	END IF;
END
$$;

-- Every node's role calls it, whatever default privileges the database's
-- owner set for functions.
GRANT EXECUTE ON FUNCTION paddock_fence(text, bigint) TO PUBLIC;
