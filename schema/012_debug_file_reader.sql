-- Which reader read each debug file's DWARF, shown by `symdex status` (-v, --json): symdex's own
-- DIE scanner and line reader, libdw for a whole file the scanner declined (and why), libdwfl for
-- a relocatable module; and which compressed sections were decompressed first. '' for a file
-- indexed before this column existed.
ALTER TABLE debug_files ADD COLUMN reader TEXT NOT NULL DEFAULT '';
