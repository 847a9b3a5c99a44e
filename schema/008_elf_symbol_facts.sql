-- What the ELF symbol table (a module's .ko, or the debug file of vmlinux/a module) says of a
-- code symbol, as common/elf_facts.h bits: 1 it has a size, 2 it is a function (STT_FUNC or
-- STT_GNU_IFUNC), 0 neither (an assembly label). NULL: no symbol table covered it (no debug
-- file, or indexed before this migration); aliases at an address are then ranked by name.
ALTER TABLE symbols ADD COLUMN elf_facts INTEGER;
-- The batch address table (store::LoadTextSymbolTable) reads elf_facts too: the covering index
-- of 005 with it added.
DROP INDEX IF EXISTS symbols_text_by_addr;
CREATE INDEX symbols_text_by_addr ON symbols
  (target_id, addr, id, type, name, size, size_exact, module_id, dwarf_function_id, src_line, elf_facts, section)
  WHERE section IS NULL AND type IN ('t', 'T', 'w', 'W', 'i');
