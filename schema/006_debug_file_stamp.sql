-- What each debug file's index was made from (debuginfo::FileStamp: stat() of `path` before
-- parsing). A cached index is reused only while its file is unchanged; rows from before this
-- migration have none and are re-checked (parsed once more) when their file is still there.
ALTER TABLE debug_files ADD COLUMN file_size INTEGER;
ALTER TABLE debug_files ADD COLUMN file_mtime_ns INTEGER;
ALTER TABLE debug_files ADD COLUMN file_ctime_ns INTEGER;
ALTER TABLE debug_files ADD COLUMN file_ino INTEGER;
ALTER TABLE debug_files ADD COLUMN file_dev INTEGER;
