-- Kernel targets and their kallsyms-level symbols.
-- Addresses are stored as signed 64-bit integers (two's complement of the u64 address).

-- One kernel: the live host, or an offline kernel (System.map + modules directory).
CREATE TABLE targets (
  id          INTEGER PRIMARY KEY,
  name        TEXT NOT NULL UNIQUE,
  kind        TEXT NOT NULL CHECK (kind IN ('live', 'offline')),
  release     TEXT,               -- uname -r of that kernel, when known
  build_id    TEXT,               -- vmlinux GNU build-ID, hex
  text_addr   INTEGER,            -- address of _text as this target sees it (KASLR'd on a live host)
  source      TEXT NOT NULL,      -- where the symbols came from, for people
  indexed_at  INTEGER NOT NULL,   -- unix seconds
  generation  INTEGER NOT NULL    -- 1 on first index, +1 on every re-index
);

-- Loadable modules of a target (vmlinux itself is not a row: symbols.module_id IS NULL).
CREATE TABLE modules (
  id          INTEGER PRIMARY KEY,
  target_id   INTEGER NOT NULL REFERENCES targets(id) ON DELETE CASCADE,
  name        TEXT NOT NULL,
  build_id    TEXT,
  text_addr   INTEGER,            -- /sys/module/M/sections/.text, live targets only
  size        INTEGER,
  path        TEXT,               -- .ko file for offline targets
  UNIQUE (target_id, name)
);

CREATE TABLE symbols (
  id          INTEGER PRIMARY KEY,
  target_id   INTEGER NOT NULL REFERENCES targets(id) ON DELETE CASCADE,
  module_id   INTEGER REFERENCES modules(id) ON DELETE CASCADE,  -- NULL: vmlinux
  name        TEXT NOT NULL,
  type        TEXT NOT NULL,      -- nm/kallsyms letter
  addr        INTEGER NOT NULL,   -- absolute; or the offset into `section` when section is set
  size        INTEGER,            -- NULL when unknown
  size_exact  INTEGER NOT NULL DEFAULT 0,  -- 1: st_size from ELF; 0: gap to the next symbol
  section     TEXT                -- offline module symbols: the section `addr` is relative to
);
CREATE INDEX symbols_by_name ON symbols (target_id, name);
CREATE INDEX symbols_by_addr ON symbols (target_id, addr);
