-- A value that changes whenever a target's symbol rows change (a new one on every write of the
-- target or of some of its modules, and when a debug file they were joined to is replaced). The
-- text-symbol file beside the index (store/text_symbol_file.h) carries the stamp it was made
-- from; a file whose stamp is not the target's is not used. 0: never stamped (rows written before
-- this column existed): no file is trusted for it.
ALTER TABLE targets ADD COLUMN symbols_stamp INTEGER NOT NULL DEFAULT 0;
