// A DWARF line-table reader (.debug_line, versions 2-5) that gives what libdw 0.188's
// dwarf_getsrclines / dwarf_getsrcfiles give — the same rows in the same order, the same file
// names — without a Dwarf_Line per row, a malloc per row past 4,096 or a qsort of pointers.
// libdw stays the oracle (tests/unit/line_table_test.cc: every unit of the fixture kernel and
// of the Debian vmlinux). Input it does not handle the way libdw does — a form outside the
// plain ones gcc and clang emit, a value that does not fit libdw's row fields, bytes past a
// section's end — is an error, and the caller then asks libdw for that unit: a reader that
// answers answers as libdw does.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <elfutils/libdw.h>

#include "server/common/status.h"

namespace symdex::debuginfo {

// One row of the line matrix, as Dwarf_Line holds it (the fields symdex reads).
struct LineRow {
  uint64_t addr = 0;
  uint32_t file = 0;  // index into LineTable::files
  int32_t line = 0;
  uint16_t column = 0;
  bool is_stmt = false;
  bool end_sequence = false;
};

// A file of the table as its entry gives it: the path libdw makes of it is FilePath's.
struct LineFile {
  const char* dir = nullptr;  // nullptr: the name alone
  const char* name = "";
};

struct LineTable {
  // libdw's file table: entry 0 is "???" before DWARF 5 (files count from 1 there). Views into
  // the sections (and the unit's comp_dir): the table lives no longer than the file's mapping.
  std::vector<LineFile> files;
  // Sorted as dwarf_getsrclines sorts them: by address, an end_sequence row before the others
  // at its address, otherwise in program order; the last row always ends a sequence.
  std::vector<LineRow> rows;

  // dwarf_getsrc_die over these rows: the last row at or below `addr`, unless it ends a
  // sequence (or there is none).
  const LineRow* RowFor(uint64_t addr) const;
  // dwarf_filesrc / dwarf_linesrc's name: an absolute name as is, else "DIR/NAME" with the
  // directory as the table lists it (DWARF < 5: directory 0 is the unit's DW_AT_comp_dir, and
  // without one the name stays bare). nullopt past the table.
  std::optional<std::string> FilePath(uint32_t file) const;
};

// The raw sections a line table refers to (views into the debug file's mapping).
struct LineSections {
  std::string_view debug_line;
  std::string_view debug_line_str;  // DW_FORM_line_strp (DWARF 5 names)
  std::string_view debug_str;       // DW_FORM_strp
};

// Reads the line table at `offset` (the unit's DW_AT_stmt_list) of a little-endian file.
// `comp_dir`: the unit's DW_AT_comp_dir, or nullptr. `address_size`: the unit's.
// InvalidArgument (with the offset and what) on anything this reader does not take as libdw would.
absl::StatusOr<LineTable> ReadLineTable(const LineSections& sections, uint64_t offset, const char* comp_dir,
                                        unsigned address_size);

// The sections of a linked (ET_EXEC/ET_DYN), little-endian, uncompressed debug file open in
// libdw, for ReadLineTable. NotFound when the file is not one of those (relocatable modules:
// libdwfl relocates their .debug_line; compressed or big-endian sections): use libdw there.
absl::StatusOr<LineSections> LinkedLineSections(Dwarf* dbg);

// The unit's table through ReadLineTable when `sections` has one for it, the unit's DW_AT_stmt_list
// and DW_AT_comp_dir as libdw reads them. NotFound: the unit has no DW_AT_stmt_list.
absl::StatusOr<LineTable> ReadUnitLineTable(const LineSections& sections, Dwarf_Die* cu);

// SYMDEX_LINE_READER=libdw in the environment: every line table through libdw (a debugging
// escape hatch, and the tests' way to build the same output both ways).
bool LibdwLinesForced();

}  // namespace symdex::debuginfo
