-- The symbols an input file lists that the index leaves out, as the kernel's own symbol table
-- does (a System.map's hypervisor labels, a module's local labels and mapping symbols), by rule:
-- one line per rule, "COUNT<TAB>RULE" ('' = none). `symdex status` shows them.
ALTER TABLE target_files ADD COLUMN dropped TEXT NOT NULL DEFAULT '';
