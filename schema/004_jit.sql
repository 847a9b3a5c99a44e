-- JIT code: jitdump and perf-map files ingested by `symdex jit ingest` (server/jit/jit_store.h).
-- A process instance is (pid, jitdump header timestamp): pids are reused, the header timestamp is
-- taken when the process opens its dump. Times are the dump's record timestamps, as written
-- (CLOCK_MONOTONIC ns for Node/V8 and CPython; arch cycles when jit_instances.flags bit 0 is set).

CREATE TABLE jit_instances (
  id             INTEGER PRIMARY KEY,
  pid            INTEGER NOT NULL,
  dump_timestamp INTEGER NOT NULL,
  version        INTEGER NOT NULL,
  elf_mach       INTEGER NOT NULL,
  big_endian     INTEGER NOT NULL,
  flags          INTEGER NOT NULL,
  max_code_size  INTEGER NOT NULL DEFAULT 0,  -- bounds the address range scan in lookups
  UNIQUE (pid, dump_timestamp)
);

-- One row per ingested jitdump file (a copy of a dump at another path is another source of the
-- same instance; its records are deduplicated by file offset).
CREATE TABLE jit_sources (
  id            INTEGER PRIMARY KEY,
  instance_id   INTEGER NOT NULL REFERENCES jit_instances(id) ON DELETE CASCADE,
  path          TEXT NOT NULL,
  resume_offset INTEGER NOT NULL,  -- next byte to read: after the last CODE_LOAD/MOVE/CLOSE taken
  file_size     INTEGER NOT NULL,  -- size when last read
  records       INTEGER NOT NULL,
  status        TEXT NOT NULL,     -- closed | complete | truncated | error
  message       TEXT NOT NULL,     -- what the last ingest said (truncation offset, error + offset)
  ingested_at   INTEGER NOT NULL,
  UNIQUE (instance_id, path)
);

-- Code bytes, stored once per distinct content (V8 writes hundreds of identical trampolines).
-- `sha1` is the SHA-1 of the bytes (= the sha1-code build-ID).
CREATE TABLE jit_code (
  id    INTEGER PRIMARY KEY,
  sha1  TEXT NOT NULL UNIQUE,
  size  INTEGER NOT NULL,
  bytes BLOB NOT NULL
);

-- One row per CODE_LOAD.
CREATE TABLE jit_loads (
  id          INTEGER PRIMARY KEY,
  instance_id INTEGER NOT NULL REFERENCES jit_instances(id) ON DELETE CASCADE,
  file_offset INTEGER NOT NULL,   -- of the CODE_LOAD record in the dump
  time        INTEGER NOT NULL,
  pid         INTEGER NOT NULL,   -- the record's pid: perf names the DSO jitted-<pid>-<code_index>.so
  tid         INTEGER NOT NULL,
  vma         INTEGER NOT NULL,
  code_addr   INTEGER NOT NULL,
  code_size   INTEGER NOT NULL,
  code_index  INTEGER NOT NULL,
  name        TEXT NOT NULL,
  code_id     INTEGER NOT NULL REFERENCES jit_code(id),
  line_bias   INTEGER NOT NULL,   -- subtract from jit_lines.addr to get the runtime address (V8: 0x40)
  has_unwinding INTEGER NOT NULL,
  UNIQUE (instance_id, file_offset)
);
CREATE INDEX jit_loads_by_index ON jit_loads (instance_id, code_index);

-- Where a load's code lives from `time` on: its CODE_LOAD, then each CODE_MOVE. `until` is the
-- time of the next move of the same code (NULL: never moved away).
CREATE TABLE jit_placements (
  load_id     INTEGER NOT NULL REFERENCES jit_loads(id) ON DELETE CASCADE,
  instance_id INTEGER NOT NULL,
  addr        INTEGER NOT NULL,
  size        INTEGER NOT NULL,
  time        INTEGER NOT NULL,
  until       INTEGER,
  file_offset INTEGER NOT NULL,   -- of the CODE_LOAD / CODE_MOVE record
  kind        TEXT NOT NULL,      -- load | move
  UNIQUE (instance_id, file_offset)
);
CREATE INDEX jit_placements_by_addr ON jit_placements (instance_id, addr);

-- DEBUG_INFO entries, as written (addr is the producer's; see jit_loads.line_bias).
CREATE TABLE jit_lines (
  load_id INTEGER NOT NULL REFERENCES jit_loads(id) ON DELETE CASCADE,
  addr    INTEGER NOT NULL,
  line    INTEGER NOT NULL,
  discrim INTEGER NOT NULL,       -- V8 writes the column here
  file    TEXT NOT NULL
);
CREATE INDEX jit_lines_by_load ON jit_lines (load_id, addr);

-- Build-IDs of each load under every scheme (server/jit/build_ids.h), computed at ingest.
CREATE TABLE jit_build_ids (
  load_id  INTEGER NOT NULL REFERENCES jit_loads(id) ON DELETE CASCADE,
  scheme   TEXT NOT NULL,         -- md5-addr | sha1-code | sha1-symtab | symdex
  build_id TEXT NOT NULL,         -- lower-case hex
  PRIMARY KEY (load_id, scheme)
) WITHOUT ROWID;
CREATE INDEX jit_build_ids_by_id ON jit_build_ids (build_id);
CREATE INDEX jit_build_ids_by_scheme ON jit_build_ids (scheme, build_id);

-- perf-<pid>.map files. A file that got shorter than what was read is a new process with the
-- same pid: a new generation, the old entries stay.
CREATE TABLE jit_perf_maps (
  id            INTEGER PRIMARY KEY,
  pid           INTEGER NOT NULL,
  path          TEXT NOT NULL,
  generation    INTEGER NOT NULL,
  consumed      INTEGER NOT NULL,  -- bytes parsed (a partial last line is left for later)
  next_line     INTEGER NOT NULL,
  entries       INTEGER NOT NULL,
  malformed     INTEGER NOT NULL,
  max_size      INTEGER NOT NULL,
  ingested_at   INTEGER NOT NULL,
  UNIQUE (path, generation)
);
CREATE INDEX jit_perf_maps_by_pid ON jit_perf_maps (pid);

CREATE TABLE jit_perf_map_entries (
  map_id INTEGER NOT NULL REFERENCES jit_perf_maps(id) ON DELETE CASCADE,
  start  INTEGER NOT NULL,
  size   INTEGER NOT NULL,
  name   TEXT NOT NULL,
  line   INTEGER NOT NULL,          -- later lines win
  PRIMARY KEY (map_id, line)
) WITHOUT ROWID;
CREATE INDEX jit_perf_map_entries_by_start ON jit_perf_map_entries (map_id, start);
