-- paddock state, version 8: the shared caches a project's runs see (a JSON
-- array of {name, mode, path}; NULL = none).
ALTER TABLE projects ADD COLUMN caches TEXT;
