#include "server/kernel/symbol_spill.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>
#include <tuple>
#include <type_traits>
#include <utility>

#include "server/common/byte_reader.h"
#include "server/common/file_util.h"
#include "server/common/strings.h"

namespace symdex::kernel {
namespace {

// One symbol: flags, type, probe, addr, the fields the flags say are present, then its name,
// section and DWARF note, each a u32 length and its bytes. Little-endian throughout.
enum Flag : uint8_t {
  kSize = 1,
  kSizeExact = 2,
  kElfFacts = 4,
  kDebugFile = 8,
  kFunction = 16,
  kUnit = 32,
  kFile = 64,
  kLine = 128,
};

// The fields present only when set, in their order on disk, each with its flag: one list the
// writer, the reader and the brief reader's skip all walk.
constexpr uint8_t kOptionalFlags[] = {kSize, kElfFacts, kDebugFile, kFunction, kUnit, kFile, kLine};
template <class Entry>
auto OptionalFields(Entry& s) {
  return std::tie(s.size, s.elf_facts, s.debug_file_id, s.dwarf_function_id, s.src_unit, s.src_file, s.src_line);
}
// fn(flag, field, a value of the field's type) for each optional field of `s`.
template <class Entry, class Fn>
void ForEachOptional(Entry& s, Fn&& fn) {
  auto fields = OptionalFields(s);
  [&]<size_t... I>(std::index_sequence<I...>) {
    (fn(kOptionalFlags[I], std::get<I>(fields), std::remove_cvref_t<decltype(*std::get<I>(fields))>{}), ...);
  }
  (std::make_index_sequence<std::tuple_size_v<decltype(fields)>>{});
}

template <typename T>
void PutInt(std::string& out, T v) {
  auto u = static_cast<std::make_unsigned_t<T>>(v);
  for (size_t i = 0; i < sizeof(T); ++i) out.push_back(static_cast<char>((u >> (8 * i)) & 0xff));
}

void PutText(std::string& out, std::string_view s) {
  PutInt<uint32_t>(out, static_cast<uint32_t>(s.size()));
  out.append(s);
}

void Serialize(const SymbolEntry& s, std::string& out) {
  uint8_t flags = s.size_exact ? kSizeExact : 0;
  ForEachOptional(s, [&](uint8_t flag, const auto& f, auto) { flags |= f ? flag : 0; });
  PutInt<uint8_t>(out, flags);
  PutInt<uint8_t>(out, static_cast<uint8_t>(s.type));
  PutInt<uint32_t>(out, s.probe);
  PutInt<uint64_t>(out, s.addr);
  ForEachOptional(s, [&](uint8_t, const auto& f, auto) {
    if (f) PutInt(out, *f);
  });
  PutText(out, s.name);
  PutText(out, s.section.str());
  PutText(out, s.dwarf_note.str());
}

absl::Status ReadBackError(int module, const ByteReader& r) {
  return absl::DataLossError(StrCat("the scratch file of module symbols reads back wrong (module ", module, ": ",
                                    r.ok() ? "length" : r.error(), ")"));
}

// The spill is this process's own file, but a read is still a read of bytes: bounded, and
// checked to the last one.
absl::StatusOr<std::vector<SymbolEntry>> Deserialize(std::string_view bytes, uint32_t count, int module) {
  ByteReader r(bytes);
  std::vector<SymbolEntry> out;
  out.reserve(count);
  constexpr size_t kMaxText = 1 << 20;
  for (uint32_t i = 0; i < count && r.ok(); ++i) {
    SymbolEntry s;
    const auto flags = r.Int<uint8_t>();
    s.type = static_cast<char>(r.Int<uint8_t>());
    s.probe = r.Int<uint32_t>();
    s.addr = r.Int<uint64_t>();
    s.size_exact = (flags & kSizeExact) != 0;
    ForEachOptional(s, [&](uint8_t flag, auto& f, auto v) {
      if (flags & flag) f = r.Int<decltype(v)>();
    });
    s.name = r.Str(kMaxText);
    const uint32_t section_size = r.Int<uint32_t>();
    if (section_size > 0) s.section = r.Bytes(section_size);
    const uint32_t note_size = r.Int<uint32_t>();
    if (note_size > 0) s.dwarf_note = r.Bytes(note_size);
    s.module = module;
    out.push_back(std::move(s));
  }
  if (!r.ok() || !r.done() || out.size() != count) return ReadBackError(module, r);
  return out;
}

// The fields of one record Brief reads; the rest skipped.
bool ReadBrief(ByteReader& r, SymbolSpill::Brief& b) {
  static const SymbolEntry kShape;
  const auto flags = r.Int<uint8_t>();
  b.type = static_cast<char>(r.Int<uint8_t>());
  b.probe = r.Int<uint32_t>();
  size_t skip = sizeof(kShape.addr);
  ForEachOptional(kShape, [&](uint8_t flag, const auto&, auto v) { skip += (flags & flag) ? sizeof(v) : 0; });
  r.Skip(skip);
  b.joined = (flags & (kFunction | kLine)) != 0;
  b.name = r.Bytes(r.Int<uint32_t>());
  r.Skip(r.Int<uint32_t>());
  r.Skip(r.Int<uint32_t>());
  return r.ok();
}

}  // namespace

std::unique_ptr<SymbolSpill> SymbolSpill::Create() {
  std::string dir;
  auto fd = UnlinkedScratchFile("symdex-symbols", dir);
  return std::unique_ptr<SymbolSpill>(new SymbolSpill(fd.ok() ? std::move(*fd) : UniqueFd()));
}

std::unique_ptr<SymbolSpill> SymbolSpill::InMemory() {
  return std::unique_ptr<SymbolSpill>(new SymbolSpill(UniqueFd()));
}

absl::Status SymbolSpill::Read(const Record& rec, std::string& out) const {
  out.resize(rec.bytes);
  if (!on_disk()) {
    out.assign(memory_, rec.offset, rec.bytes);
    return absl::OkStatus();
  }
  size_t done = 0;
  while (done < rec.bytes) {
    const ssize_t n = ::pread(fd_.get(), out.data() + done, rec.bytes - done, static_cast<off_t>(rec.offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return absl::DataLossError(StrCat("cannot read the scratch file of module symbols: ",
                                        n < 0 ? std::strerror(errno) : "it is shorter than written"));
    }
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

absl::StatusOr<uint32_t> SymbolSpill::Fetch(int module, std::string& bytes) const {
  Record rec;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (module < 0 || static_cast<size_t>(module) >= records_.size()) return 0;
    rec = records_[static_cast<size_t>(module)];
    if (rec.count == 0) return 0;
    if (!on_disk()) RETURN_IF_ERROR(Read(rec, bytes));  // memory_ may grow under another Put
  }
  if (on_disk()) RETURN_IF_ERROR(Read(rec, bytes));
  return rec.count;
}

absl::StatusOr<std::vector<SymbolEntry>> SymbolSpill::Get(int module) const {
  std::string bytes;
  ASSIGN_OR_RETURN(const uint32_t count, Fetch(module, bytes));
  if (count == 0) return std::vector<SymbolEntry>();
  return Deserialize(bytes, count, module);
}

absl::Status SymbolSpill::VisitBriefs(int module, const std::function<void(const Brief&)>& fn) const {
  std::string bytes;
  ASSIGN_OR_RETURN(const uint32_t count, Fetch(module, bytes));
  ByteReader r(bytes);
  Brief b{};
  for (uint32_t i = 0; i < count && ReadBrief(r, b); ++i) fn(b);
  if (!r.ok() || !r.done()) return ReadBackError(module, r);
  return absl::OkStatus();
}

absl::Status SymbolSpill::Put(int module, const std::vector<SymbolEntry>& syms) {
  if (module < 0) return absl::InvalidArgumentError("vmlinux's symbols are not spilled");
  if (syms.size() > std::numeric_limits<uint32_t>::max()) return absl::InvalidArgumentError("too many symbols");
  std::string bytes;
  for (const SymbolEntry& s : syms) Serialize(s, bytes);
  std::lock_guard<std::mutex> l(mu_);
  if (static_cast<size_t>(module) >= records_.size()) records_.resize(static_cast<size_t>(module) + 1);
  Record& rec = records_[static_cast<size_t>(module)];
  // In place when it fits (the probe and ELF-fact steps change no length), else at the end.
  uint64_t at = rec.offset;
  if (bytes.size() > rec.capacity) at = end_;
  if (on_disk()) {
    RETURN_IF_ERROR(WriteAllAt(fd_.get(), bytes, at, "the scratch file of module symbols"));
  } else if (at == end_) {
    memory_.append(bytes);
  } else {
    memory_.replace(at, bytes.size(), bytes);
  }
  if (at == end_) {
    end_ += bytes.size();
    rec.capacity = bytes.size();
  }
  rec.offset = at;
  rec.bytes = bytes.size();
  total_ = total_ - rec.count + syms.size();
  rec.count = static_cast<uint32_t>(syms.size());
  return absl::OkStatus();
}

absl::Status SymbolSpill::Update(int module, const std::function<void(std::vector<SymbolEntry>&)>& change) {
  ASSIGN_OR_RETURN(std::vector<SymbolEntry> syms, Get(module));
  if (syms.empty()) return absl::OkStatus();
  change(syms);
  return Put(module, syms);
}

size_t SymbolSpill::Count(int module) const {
  std::lock_guard<std::mutex> l(mu_);
  return module >= 0 && static_cast<size_t>(module) < records_.size() ? records_[static_cast<size_t>(module)].count : 0;
}

size_t SymbolSpill::total() const {
  std::lock_guard<std::mutex> l(mu_);
  return total_;
}

std::vector<int> SymbolSpill::Modules() const {
  std::lock_guard<std::mutex> l(mu_);
  std::vector<int> out;
  for (size_t m = 0; m < records_.size(); ++m) {
    if (records_[m].count > 0) out.push_back(static_cast<int>(m));
  }
  return out;
}

absl::Status SpillModuleSymbols(KernelTarget& t) {
  if (t.spill) return absl::OkStatus();
  std::shared_ptr<SymbolSpill> spill = SymbolSpill::Create();
  // The load order, and each module's symbols by index.
  std::vector<std::vector<size_t>> of_module(t.modules.size());
  for (size_t i = 0; i < t.symbols.size(); ++i) {
    const int m = t.symbols[i].module;
    if (spill->runs.empty() || spill->runs.back().first != m) spill->runs.emplace_back(m, 0);
    ++spill->runs.back().second;
    if (m >= 0) {
      if (static_cast<size_t>(m) >= of_module.size()) {
        return absl::InternalError(StrCat("symbol ", t.symbols[i].name, " of module #", m, ", which is not loaded"));
      }
      of_module[static_cast<size_t>(m)].push_back(i);
    }
  }
  for (size_t m = 0; m < of_module.size(); ++m) {
    if (of_module[m].empty()) continue;
    std::vector<SymbolEntry> syms;
    syms.reserve(of_module[m].size());
    for (size_t i : of_module[m]) syms.push_back(std::move(t.symbols[i]));
    std::vector<size_t>().swap(of_module[m]);
    RETURN_IF_ERROR(spill->Put(static_cast<int>(m), syms));
  }
  // vmlinux's symbols, in their order, into an array of their size.
  std::vector<SymbolEntry> vmlinux;
  size_t n = 0;
  for (const auto& [owner, count] : spill->runs) n += owner < 0 ? count : 0;
  vmlinux.reserve(n);
  for (SymbolEntry& s : t.symbols) {
    if (s.module < 0) vmlinux.push_back(std::move(s));
  }
  t.symbols = std::move(vmlinux);
  t.spill = std::move(spill);
  return absl::OkStatus();
}

absl::Status ForEachSymbol(const KernelTarget& t, const std::function<absl::Status(const SymbolEntry&)>& fn) {
  if (!t.spill) {
    for (const SymbolEntry& s : t.symbols) RETURN_IF_ERROR(fn(s));
    return absl::OkStatus();
  }
  // A module's symbols are read once, at its first run, and let go after its last.
  std::vector<size_t> next(t.modules.size(), 0);
  std::vector<std::vector<SymbolEntry>> open(t.modules.size());
  size_t vmlinux = 0;
  for (const auto& [owner, count] : t.spill->runs) {
    if (owner < 0) {
      for (uint32_t k = 0; k < count; ++k) {
        if (vmlinux >= t.symbols.size()) return absl::InternalError("vmlinux's symbols do not match their load order");
        RETURN_IF_ERROR(fn(t.symbols[vmlinux++]));
      }
      continue;
    }
    const auto m = static_cast<size_t>(owner);
    if (m >= open.size()) return absl::InternalError("a spilled module that is not loaded");
    if (next[m] == 0) {
      ASSIGN_OR_RETURN(open[m], t.spill->Get(owner));
      if (t.spill->finish) t.spill->finish(open[m]);
    }
    if (next[m] + count > open[m].size())
      return absl::InternalError("a module's symbols do not match their load order");
    for (uint32_t k = 0; k < count; ++k) RETURN_IF_ERROR(fn(open[m][next[m]++]));
    if (next[m] == open[m].size()) std::vector<SymbolEntry>().swap(open[m]);
  }
  return absl::OkStatus();
}

size_t SymbolCount(const KernelTarget& t) { return t.symbols.size() + (t.spill ? t.spill->total() : 0); }

}  // namespace symdex::kernel
