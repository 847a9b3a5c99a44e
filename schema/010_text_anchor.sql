-- The symbol a KASLR-proof vmlinux probe is written against (ANCHOR+N) and its address: _text
-- where the kernel's kallsyms lists it; _stext where it does not (arm64 without
-- CONFIG_KALLSYMS_ALL: kallsyms keeps text symbols only, and _text is the image header before
-- _stext). text_addr stays the kernel's _text, which KASLR slides are taken from; on a live arm64
-- host it is derived from the anchor and the vmlinux debug file, NULL without one. A row
-- written before this column has anchor_addr NULL: its anchor is _text at text_addr.
ALTER TABLE targets ADD COLUMN text_anchor TEXT NOT NULL DEFAULT '_text';
ALTER TABLE targets ADD COLUMN anchor_addr INTEGER;
-- The kernel's architecture, as ELF e_machine (62 x86-64, 183 AArch64) of the files its probe
-- tables were read from; NULL when none was read. What differs by architecture is
-- common/kernel_arch.h's.
ALTER TABLE targets ADD COLUMN machine INTEGER;
