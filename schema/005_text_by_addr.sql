-- Symbolizing a batch of addresses reads a target's text symbols (those with absolute
-- addresses) once, in address order, instead of one lookup per address
-- (store::LoadTextSymbolTable): a covering index over exactly those rows and columns
-- (`section` too: SQLite 3.40 counts a column of the WHERE as needed even when always NULL).
CREATE INDEX symbols_text_by_addr ON symbols
  (target_id, addr, id, type, name, size, size_exact, module_id, dwarf_function_id, src_line, section)
  WHERE section IS NULL AND type IN ('t', 'T', 'w', 'W', 'i');
