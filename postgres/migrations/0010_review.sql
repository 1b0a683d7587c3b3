-- paddock state, version 10 (as SQLite's): a review run names the change
-- set it reviews (another run's submission, by hash, and its commit).
ALTER TABLE runs ADD COLUMN review_of text;
