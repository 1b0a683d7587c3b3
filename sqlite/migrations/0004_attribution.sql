-- paddock state, version 4: the attribution-lint rules a project allows (a
-- JSON array of rule names; NULL = none).
ALTER TABLE projects ADD COLUMN attribution_allow TEXT;
