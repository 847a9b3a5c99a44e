-- DWARF-level facts, stored once per debug file build-ID and shared by every target that uses
-- that build-ID: re-indexing a host, or a second host with the same kernel, parses nothing.
-- Addresses: linked images (vmlinux) use link-time addresses; relocatable modules use
-- (section, offset), the section named in dwarf_sections.

CREATE TABLE debug_files (
  id            INTEGER PRIMARY KEY,
  build_id      TEXT NOT NULL UNIQUE,
  relocatable   INTEGER NOT NULL,   -- 1: ET_REL module, addresses are section offsets
  path          TEXT NOT NULL,      -- where it was first read from
  text_addr     INTEGER,            -- link-time _text (linked images), for the KASLR slide
  indexed_at    INTEGER NOT NULL,
  index_seconds REAL NOT NULL,
  units         INTEGER NOT NULL,
  functions     INTEGER NOT NULL,
  variables     INTEGER NOT NULL
);

CREATE TABLE dwarf_sections (
  debug_file_id INTEGER NOT NULL REFERENCES debug_files(id) ON DELETE CASCADE,
  idx           INTEGER NOT NULL,
  name          TEXT NOT NULL,
  PRIMARY KEY (debug_file_id, idx)
) WITHOUT ROWID;

CREATE TABLE dwarf_files (
  debug_file_id INTEGER NOT NULL REFERENCES debug_files(id) ON DELETE CASCADE,
  idx           INTEGER NOT NULL,
  path          TEXT NOT NULL,      -- source-tree relative: drivers/pnp/card.c
  raw_path      TEXT NOT NULL,      -- as DWARF has it: debian/build/build_amd64_none_cloud-amd64/...
  PRIMARY KEY (debug_file_id, idx)
) WITHOUT ROWID;

CREATE TABLE dwarf_units (
  debug_file_id INTEGER NOT NULL REFERENCES debug_files(id) ON DELETE CASCADE,
  idx           INTEGER NOT NULL,
  name          TEXT NOT NULL,      -- source-tree relative CU name
  raw_name      TEXT NOT NULL,
  comp_dir      TEXT NOT NULL,
  PRIMARY KEY (debug_file_id, idx)
) WITHOUT ROWID;

-- One row per concrete function instance.
CREATE TABLE dwarf_functions (
  id            INTEGER PRIMARY KEY,
  debug_file_id INTEGER NOT NULL REFERENCES debug_files(id) ON DELETE CASCADE,
  name          TEXT NOT NULL,      -- DWARF name: no .isra/.constprop/.cold suffix
  section       INTEGER,            -- dwarf_sections.idx of `entry` (relocatable files)
  entry         INTEGER NOT NULL,
  unit          INTEGER NOT NULL,
  decl_file     INTEGER,            -- dwarf_files.idx
  decl_line     INTEGER,
  entry_file    INTEGER,            -- line-table row at entry (what addr2line prints)
  entry_line    INTEGER,
  flags         INTEGER NOT NULL    -- 1 external, 2 out-of-line copy of a declared-inline function
);
CREATE INDEX dwarf_functions_by_name ON dwarf_functions (debug_file_id, name);

-- Every address range of every function ([lo, hi)), hot part and .cold parts alike.
CREATE TABLE dwarf_ranges (
  function_id   INTEGER NOT NULL REFERENCES dwarf_functions(id) ON DELETE CASCADE,
  section       INTEGER,
  lo            INTEGER NOT NULL,
  hi            INTEGER NOT NULL
);
CREATE INDEX dwarf_ranges_by_function ON dwarf_ranges (function_id);

CREATE TABLE dwarf_variables (
  id            INTEGER PRIMARY KEY,
  debug_file_id INTEGER NOT NULL REFERENCES debug_files(id) ON DELETE CASCADE,
  name          TEXT NOT NULL,
  section       INTEGER,
  addr          INTEGER NOT NULL,
  unit          INTEGER NOT NULL,
  decl_file     INTEGER,
  decl_line     INTEGER,
  flags         INTEGER NOT NULL    -- 1 external
);
CREATE INDEX dwarf_variables_by_name ON dwarf_variables (debug_file_id, name);

-- The line-table row at each text symbol address of the debug file's own symbol table.
CREATE TABLE dwarf_symbol_lines (
  debug_file_id INTEGER NOT NULL REFERENCES debug_files(id) ON DELETE CASCADE,
  section       INTEGER NOT NULL,   -- dwarf_sections.idx, -1 for linked images
  addr          INTEGER NOT NULL,
  unit          INTEGER,            -- NULL: no compilation unit covers the address
  file          INTEGER,
  line          INTEGER NOT NULL,
  PRIMARY KEY (debug_file_id, section, addr)
) WITHOUT ROWID;

-- Which debug file each part of a target (vmlinux, each module) uses, or why none.
CREATE TABLE target_debuginfo (
  id            INTEGER PRIMARY KEY,
  target_id     INTEGER NOT NULL REFERENCES targets(id) ON DELETE CASCADE,
  module        TEXT NOT NULL,      -- '' = vmlinux
  build_id      TEXT,               -- what the target says the build-ID is
  debug_file_id INTEGER REFERENCES debug_files(id),
  status        TEXT NOT NULL CHECK (status IN ('used', 'cached', 'not-found', 'build-id-mismatch',
                                                'parse-error', 'no-build-id')),
  path          TEXT,
  origin        TEXT,               -- local | debuginfod
  detail        TEXT
);
CREATE INDEX target_debuginfo_by_target ON target_debuginfo (target_id);

-- Live module section bases (/sys/module/M/sections/*): turns a loaded module's absolute
-- addresses into (section, offset) for the DWARF join.
CREATE TABLE module_sections (
  module_id     INTEGER NOT NULL REFERENCES modules(id) ON DELETE CASCADE,
  name          TEXT NOT NULL,
  addr          INTEGER NOT NULL
);
CREATE INDEX module_sections_by_module ON module_sections (module_id);

-- The symbol -> DWARF join, made at index time: the debug file of the symbol's vmlinux/module,
-- the function instance containing it (NULL: dwarf_note says why), and the line-table row at
-- the symbol's own address (src_*; indexes into that debug file's units/files).
ALTER TABLE symbols ADD COLUMN debug_file_id INTEGER;
ALTER TABLE symbols ADD COLUMN dwarf_function_id INTEGER;
ALTER TABLE symbols ADD COLUMN src_unit INTEGER;
ALTER TABLE symbols ADD COLUMN src_file INTEGER;
ALTER TABLE symbols ADD COLUMN src_line INTEGER;
ALTER TABLE symbols ADD COLUMN dwarf_note TEXT;
