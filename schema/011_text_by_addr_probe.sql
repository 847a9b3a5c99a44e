-- The batch address table (store::LoadTextSymbolTable) reads the probe bits too: a frame in an
-- arm64 function's patchable-entry NOPs is symbolized as the function's first instruction only
-- when the function has its ftrace site there. The covering index of 008 with probe added.
DROP INDEX IF EXISTS symbols_text_by_addr;
CREATE INDEX symbols_text_by_addr ON symbols
  (target_id, addr, id, type, name, size, size_exact, module_id, dwarf_function_id, src_line, elf_facts, probe, section)
  WHERE section IS NULL AND type IN ('t', 'T', 'w', 'W', 'i');
