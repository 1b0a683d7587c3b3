-- paddock state, version 7: whether a run's change sets include the files
-- the base's ignore rules leave out.
ALTER TABLE runs ADD COLUMN include_ignored INTEGER NOT NULL DEFAULT 0;
