-- Two options of the kernel's config (NULL: no kernel config read) that decide whether a BPF link
-- exists at all: CONFIG_FPROBE, kprobe_multi links (bpf_program__attach_kprobe_multi_opts); and
-- CONFIG_DYNAMIC_FTRACE_WITH_DIRECT_CALLS, BPF trampolines (fentry/fexit) on functions ftrace patches.
ALTER TABLE targets ADD COLUMN fprobe INTEGER;
ALTER TABLE targets ADD COLUMN ftrace_direct INTEGER;
