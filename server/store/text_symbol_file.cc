#include "server/store/text_symbol_file.h"

#include <cstring>
#include <type_traits>

#include "server/common/byte_reader.h"
#include "server/common/file_util.h"
#include "server/common/strings.h"

namespace symdex::store {

// The file: a FileHeader; `entries` TextSymbolTable::Entry records (in address order); the names
// (`names_bytes`, each NUL-terminated; an entry's `name` is an offset into them); the module
// names (`modules_bytes`: `modules` NUL-terminated names, the first "" for vmlinux); the owner
// extents' modules (`extents_bytes`: `extents` records of start, end (8 bytes each) and a
// NUL-terminated name). Nothing else, nothing after.
struct TextSymbolFileAccess {
  static constexpr char kMagic[8] = {'S', 'D', 'X', 'T', 'S', 'Y', 'M', '\n'};
  static constexpr uint32_t kVersion = 1;
  static constexpr uint32_t kByteOrder = 0x01020304;
  static constexpr uint32_t kHasStart = 1, kHasEnd = 2, kUnplaced = 4;

  struct FileHeader {
    char magic[8];
    uint32_t version;
    uint32_t byte_order;
    uint32_t entry_size;
    uint32_t flags;
    int64_t target_id;
    int64_t generation;
    int64_t symbols_stamp;
    uint64_t vmlinux_start;
    uint64_t vmlinux_end;
    uint64_t entries;
    uint64_t names_bytes;
    uint64_t modules;
    uint64_t modules_bytes;
    uint64_t extents;
    uint64_t extents_bytes;
  };
  using Entry = TextSymbolTable::Entry;
  static_assert(std::is_trivially_copyable_v<Entry> && sizeof(Entry) % 8 == 0 && sizeof(FileHeader) % 8 == 0);

  static std::string Serialize(const TextSymbolTable& table, const TargetInfo& t) {
    FileHeader h{};
    std::memcpy(h.magic, kMagic, sizeof kMagic);
    h.version = kVersion;
    h.byte_order = kByteOrder;
    h.entry_size = sizeof(Entry);
    const OwnerExtents& ex = table.extents_;
    h.flags =
        (ex.vmlinux_start ? kHasStart : 0) | (ex.vmlinux_end ? kHasEnd : 0) | (ex.modules_unplaced ? kUnplaced : 0);
    h.target_id = t.id;
    h.generation = t.generation;
    h.symbols_stamp = t.symbols_stamp;
    h.vmlinux_start = ex.vmlinux_start.value_or(0);
    h.vmlinux_end = ex.vmlinux_end.value_or(0);
    h.entries = table.entries_.size();
    h.names_bytes = table.names_.size();
    std::string modules;
    for (const std::string& m : table.modules_) {
      modules += m;
      modules.push_back('\0');
    }
    h.modules = table.modules_.size();
    h.modules_bytes = modules.size();
    std::string extents;
    for (const OwnerExtents::Module& m : ex.modules) {
      extents.append(reinterpret_cast<const char*>(&m.start), 8);
      extents.append(reinterpret_cast<const char*>(&m.end), 8);
      extents += m.name;
      extents.push_back('\0');
    }
    h.extents = ex.modules.size();
    h.extents_bytes = extents.size();
    std::string out;
    out.reserve(sizeof h + table.entries_.size_bytes() + table.names_.size() + modules.size() + extents.size());
    out.append(reinterpret_cast<const char*>(&h), sizeof h);
    out.append(reinterpret_cast<const char*>(table.entries_.data()), table.entries_.size_bytes());
    out.append(table.names_);
    out += modules;
    out += extents;
    return out;
  }

  static absl::StatusOr<std::shared_ptr<const TextSymbolTable>> Map(const std::string& path, const TargetInfo& t) {
    ASSIGN_OR_RETURN(MappedFile mapped, MappedFile::MapPrivate(path));
    auto file = std::make_shared<const MappedFile>(std::move(mapped));
    const std::span<const char> bytes = file->bytes();
    auto bad = [&](std::string_view why) { return absl::DataLossError(StrCat(path, ": ", why)); };
    FileHeader h;
    if (bytes.size() < sizeof h) return bad("shorter than its header");
    std::memcpy(&h, bytes.data(), sizeof h);
    if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0) return bad("not a text-symbol file");
    if (h.version != kVersion || h.byte_order != kByteOrder || h.entry_size != sizeof(Entry)) {
      return bad("made by another version of symdex or on another kind of machine");
    }
    if (h.target_id != t.id || h.generation != t.generation || h.symbols_stamp != t.symbols_stamp ||
        t.symbols_stamp == 0) {
      return absl::FailedPreconditionError(StrCat(path, ": made from generation ", h.generation, " of target ",
                                                  h.target_id, ", not from the indexed ", t.generation, " of ", t.id,
                                                  " (or its symbols changed since)"));
    }
    // Each part within what is left of the file, then nothing after the last.
    size_t at = sizeof h;
    auto take = [&](uint64_t n, uint64_t unit, std::string_view what) -> absl::StatusOr<std::span<const char>> {
      const size_t left = bytes.size() - at;
      if (n > left / unit) return bad(StrCat("its ", what, " run past the end of the file"));
      std::span<const char> part = bytes.subspan(at, n * unit);
      at += part.size();
      return part;
    };
    ASSIGN_OR_RETURN(auto entries, take(h.entries, sizeof(Entry), "symbols"));
    ASSIGN_OR_RETURN(auto names, take(h.names_bytes, 1, "names"));
    ASSIGN_OR_RETURN(auto modules, take(h.modules_bytes, 1, "module names"));
    ASSIGN_OR_RETURN(auto extents, take(h.extents_bytes, 1, "module extents"));
    if (at != bytes.size()) return bad("has bytes after its last part");
    if (!names.empty() && names.back() != '\0') return bad("a name is not terminated");
    if (!modules.empty() && modules.back() != '\0') return bad("a module name is not terminated");

    auto out = std::make_shared<TextSymbolTable>();
    for (size_t i = 0; i < modules.size();) {
      const size_t len = std::strlen(modules.data() + i);
      out->modules_.emplace_back(modules.data() + i, len);
      i += len + 1;
    }
    if (out->modules_.size() != h.modules || out->modules_.empty()) return bad("its module list does not add up");
    // The mapping is 8-byte aligned (a page) and so is every part before the names.
    const std::span<const Entry> es(reinterpret_cast<const Entry*>(entries.data()), h.entries);
    for (size_t i = 0; i < es.size(); ++i) {
      if (es[i].name >= names.size() || es[i].module >= out->modules_.size()) {
        return bad(StrCat("symbol ", i, " names a name or module the file does not have"));
      }
      if (i > 0 && es[i].addr < es[i - 1].addr) return bad("its symbols are not in address order");
    }
    OwnerExtents& ex = out->extents_;
    if (h.flags & kHasStart) ex.vmlinux_start = h.vmlinux_start;
    if (h.flags & kHasEnd) ex.vmlinux_end = h.vmlinux_end;
    ex.modules_unplaced = (h.flags & kUnplaced) != 0;
    ByteReader r(std::string_view(extents.data(), extents.size()),
                 std::endian::native);  // written in this host's order, as the header is
    while (!r.done()) {
      if (r.remaining() < 17) return bad("a module extent is cut short");
      OwnerExtents::Module m;
      m.start = r.Int<uint64_t>();
      m.end = r.Int<uint64_t>();
      std::optional<std::string_view> name = r.CString();
      if (!name) return bad("a module extent's name is not terminated");
      m.name = std::string(*name);
      ex.modules.push_back(std::move(m));
    }
    if (ex.modules.size() != h.extents) return bad("its module extents do not add up");
    out->entries_ = es;
    out->names_ = std::string_view(names.data(), names.size());
    out->file_ = std::move(file);
    return std::shared_ptr<const TextSymbolTable>(std::move(out));
  }
};

std::string TextSymbolFilePath(const std::string& dir, int64_t target_id) {
  return StrCat(dir, "/target-", target_id, ".textsyms");
}

absl::Status WriteTextSymbolFile(Db& db, const TargetInfo& t) {
  const std::string dir = AddrMapDirFor(db.path());
  if (dir.empty() || t.symbols_stamp == 0) return absl::OkStatus();
  ASSIGN_OR_RETURN(auto table, LoadTextSymbolTable(db, t.id));
  const std::string bytes = TextSymbolFileAccess::Serialize(*table, t);
  return InstallPrivateFile(TextSymbolFilePath(dir, t.id), bytes, ".tmp.", "text-symbols-temp",
                            "text-symbols-installed");
}

absl::StatusOr<std::shared_ptr<const TextSymbolTable>> MapTextSymbolFile(const std::string& path, const TargetInfo& t) {
  return TextSymbolFileAccess::Map(path, t);
}

absl::StatusOr<std::shared_ptr<const TextSymbolTable>> OpenTextSymbolTable(Db& db, const TargetInfo& t,
                                                                           bool* from_file) {
  if (from_file != nullptr) *from_file = false;
  if (const std::string dir = AddrMapDirFor(db.path()); !dir.empty() && t.symbols_stamp != 0) {
    auto mapped = TextSymbolFileAccess::Map(TextSymbolFilePath(dir, t.id), t);
    if (mapped.ok()) {
      if (from_file != nullptr) *from_file = true;
      return mapped;
    }
  }
  return LoadTextSymbolTable(db, t.id);
}

}  // namespace symdex::store
