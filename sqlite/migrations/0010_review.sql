-- paddock state, version 10: a review run names the change set it reviews
-- (another run's submission, by hash, and the commit that holds it).
ALTER TABLE runs ADD COLUMN review_of TEXT;
