-- What each index run read, and what happened to each input: shown by `symdex status`, so a
-- missing or corrupt file is visible instead of silently producing fewer symbols.
CREATE TABLE target_files (
  id          INTEGER PRIMARY KEY,
  target_id   INTEGER NOT NULL REFERENCES targets(id) ON DELETE CASCADE,
  role        TEXT NOT NULL,      -- kallsyms, modules, notes, system-map, module, ...
  path        TEXT NOT NULL,
  status      TEXT NOT NULL CHECK (status IN ('used', 'missing', 'error', 'skipped')),
  detail      TEXT                -- the reason, for anything but 'used'
);
CREATE INDEX target_files_by_target ON target_files (target_id);

-- Warnings that applied to the whole run (e.g. no build-ID available).
ALTER TABLE targets ADD COLUMN warnings TEXT NOT NULL DEFAULT '';
