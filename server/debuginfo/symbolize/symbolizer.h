// Address -> source frames (leaf first, the inline chain up to the containing function), read
// lazily from a debug file through libdw, or from the build-ID's address map (addr_map.h)
// when one has been built: the same answers without parsing DWARF. Only what a query touches
// is parsed, and handles stay open per file.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "server/common/status.h"
#include "server/debuginfo/dwarf/body_lines.h"
#include "server/debuginfo/dwarf/fetch_args.h"
#include "server/debuginfo/symbolize/addr_map.h"

namespace symdex::debuginfo {

struct CuFunctions;

class Symbolizer {
 public:
  Symbolizer();
  ~Symbolizer();
  Symbolizer(const Symbolizer&) = delete;
  Symbolizer& operator=(const Symbolizer&) = delete;

  // Frames for `dwarf_addr` (a linked image's link-time address) in the debug file at `path`.
  // Empty when DWARF has nothing for the address.
  absl::StatusOr<std::vector<Frame>> Symbolize(const std::string& path, uint64_t dwarf_addr);

  // The same, from `build_id_hex`'s address map in the address-map directory when it holds a
  // valid one (checked once per build-ID), else from `path` through libdw.
  absl::StatusOr<std::vector<Frame>> SymbolizeLinked(const std::string& path, const std::string& build_id_hex,
                                                     uint64_t dwarf_addr);
  // Where address maps are looked up ("" = never).
  void SetAddrMapDir(std::string dir) { addr_map_dir_ = std::move(dir); }

  // The same for a relocatable debug file (an ET_REL kernel module): the address is `offset`
  // into section `section` (as /sys/module/M/sections/SECTION places it), mapped through
  // libdwfl's layout of the relocated sections — from `build_id_hex`'s address map when there is
  // a valid one (it carries that layout), else through libdwfl. NotFound when the file has no
  // such section.
  absl::StatusOr<std::vector<Frame>> SymbolizeInSection(const std::string& path, const std::string& build_id_hex,
                                                        const std::string& section, uint64_t offset);

  // One function copy in a debug file, for probe arguments: its symbol's DWARF address (a
  // linked file), or `section` + `symbol` (a relocatable one, as SymbolizeInSection places it);
  // `offset` bytes in is where the probe fires. `dwarf_name` (when given) must be the name of the
  // subprogram found there.
  struct CopyAt {
    std::string section;  // "" = a linked file
    uint64_t symbol = 0;
    uint64_t offset = 0;
    bool ret = false;
    std::string dwarf_name;
    uint64_t entry_slack = 0;  // FetchSite::entry_slack
    // A function the compiler inlined into the copy: the site is then the innermost inlined copy
    // of that name holding the probe's address (its DW_TAG_inlined_subroutine), not the copy.
    std::string inlined;
  };
  // debuginfo::CompileFetchArgs (fetch_args.h) for that copy; NotFound when the file has no
  // function there.
  absl::StatusOr<CompiledArgs> FetchArgs(const std::string& path, const CopyAt& at,
                                         const std::vector<ingest::ProbeArg>& args, const FetchContext& ctx);
  // The file (source-tree relative) the function inlined at `at` (CopyAt::inlined) was declared in.
  absl::StatusOr<std::string> InlinedDeclFile(const std::string& path, const CopyAt& at, const FetchContext& ctx);
  // debuginfo::ScopeVariables for that copy.
  absl::StatusOr<std::vector<ScopeVariable>> Variables(const std::string& path, const CopyAt& at,
                                                       const FetchContext& ctx);
  // debuginfo::FindLinePlaces (body_lines.h) in that copy, with its places (`pcs`, `shared`)
  // as offsets from the symbol.
  absl::StatusOr<LinePlaces> BodyLines(const std::string& path, const CopyAt& at, int line, bool relative,
                                       const FetchContext& ctx);

  // Closes every debug file and address map and drops what was parsed from them.
  void Clear();
  size_t open_files() const { return files_.size() + maps_.size(); }

  // Every address where the line table starts a statement of `file_suffix`:`line`
  // (file_suffix matched on whole path components of the source-tree relative path), sorted.
  absl::StatusOr<std::vector<uint64_t>> LineAddresses(const std::string& path, const std::string& file_suffix,
                                                      int line);
  // The same in a relocatable debug file (a module): (section, offset) pairs, to be placed at
  // the section bases /sys/module/M/sections gives.
  absl::StatusOr<std::vector<std::pair<std::string, uint64_t>>> LineAddressesInSections(const std::string& path,
                                                                                        const std::string& file_suffix,
                                                                                        int line);

 private:
  struct File;
  absl::StatusOr<File*> Open(const std::string& path);
  absl::StatusOr<File*> OpenRelocatable(const std::string& path);
  std::vector<Frame> FramesAt(File* f, uint64_t dwarf_addr);
  // The unit of `addr` and its functions' spans (parsed once per unit).
  CuFunctions* UnitOf(File* f, uint64_t addr, Dwarf_Die* cu);
  absl::StatusOr<FetchSite> SiteOf(const std::string& path, const CopyAt& at, const FetchContext& ctx);
  // The build-ID's address map, when the directory holds a valid one (null: read DWARF).
  const AddrMap* MapFor(const std::string& build_id_hex);
  std::map<std::string, std::unique_ptr<File>> files_;
  std::string addr_map_dir_;
  struct MapSlot {
    std::unique_ptr<MappedAddrMap> map;  // null: none usable when last looked
    std::chrono::steady_clock::time_point looked;
  };
  std::map<std::string, MapSlot> maps_;  // by build-ID
};

}  // namespace symdex::debuginfo
