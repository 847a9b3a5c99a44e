-- Probe verdicts: what the kernel's own tables (fentry sites in __mcount_loc, init text, the
-- kprobe blacklist) say about probing each code symbol, as the bits of kernel::ProbeBits
-- (server/kernel/probe_bits.h). 0: not judged (a data symbol, or indexed before verdicts).
ALTER TABLE symbols ADD COLUMN probe INTEGER NOT NULL DEFAULT 0;
-- The kernel's CONFIG_KPROBE_EVENTS_ON_NOTRACE: 1 y, 0 n, NULL no kernel config was found;
-- kernel_config says where it was read.
ALTER TABLE targets ADD COLUMN kprobe_events_on_notrace INTEGER;
ALTER TABLE targets ADD COLUMN kernel_config TEXT NOT NULL DEFAULT '';
