#include "server/jit/jitted_dso.h"

#include <elf.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <charconv>
#include <filesystem>
#include <set>

#include "server/common/file_util.h"
#include "server/common/strings.h"
#include "server/ingest/elf_symbols.h"
#include "server/jit/build_ids.h"

namespace symdex::jit {
namespace {

namespace fs = std::filesystem;
using store::FromDb;
using store::Stmt;
using store::ToDb;

bool LooksLikeJittedDso(std::string_view name) {
  return name.size() > 10 && name.starts_with("jitted-") && name.ends_with(".so");
}

template <typename T>
std::optional<T> ParseDecimal(std::string_view s) {
  if (s.empty() || s.size() > 20) return std::nullopt;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
  }
  T v{};
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

// A file cut short says so, rather than libelf's "no symbol table" or "bad section header": the
// section header table (ELF64 or ELF32, host byte order -- other orders are left to libelf) must
// end inside the file.
std::optional<std::string> TruncatedElf(std::string_view image) {
  if (image.size() < EI_NIDENT || std::memcmp(image.data(), ELFMAG, SELFMAG) != 0) return std::nullopt;
  const bool host_le = std::endian::native == std::endian::little;
  if (image[EI_DATA] != (host_le ? ELFDATA2LSB : ELFDATA2MSB)) return std::nullopt;
  uint64_t shoff = 0, need_hdr = 0, shentsize = 0, shnum = 0;
  if (image[EI_CLASS] == ELFCLASS64) {
    need_hdr = sizeof(Elf64_Ehdr);
    if (image.size() < need_hdr) return StrCat("truncated: ", image.size(), " bytes, shorter than the ELF header");
    Elf64_Ehdr eh;
    std::memcpy(&eh, image.data(), sizeof eh);
    shoff = eh.e_shoff, shentsize = eh.e_shentsize, shnum = eh.e_shnum;
  } else if (image[EI_CLASS] == ELFCLASS32) {
    need_hdr = sizeof(Elf32_Ehdr);
    if (image.size() < need_hdr) return StrCat("truncated: ", image.size(), " bytes, shorter than the ELF header");
    Elf32_Ehdr eh;
    std::memcpy(&eh, image.data(), sizeof eh);
    shoff = eh.e_shoff, shentsize = eh.e_shentsize, shnum = eh.e_shnum;
  } else {
    return std::nullopt;
  }
  if (shoff == 0 || shnum == 0) return std::nullopt;  // e_shnum 0 may mean "in section 0": libelf decides
  if (shoff > image.size() || shentsize * shnum > image.size() - shoff) {
    return StrCat("truncated: the section headers end at byte ", shoff + shentsize * shnum, " but the file has ",
                  image.size());
  }
  return std::nullopt;
}

}  // namespace

std::optional<JittedDsoName> ParseJittedDsoName(std::string_view file_name) {
  if (!LooksLikeJittedDso(file_name)) return std::nullopt;
  std::string_view mid = file_name.substr(7, file_name.size() - 7 - 3);  // "<pid>-<idx>"
  size_t dash = mid.find('-');
  if (dash == std::string_view::npos) return std::nullopt;
  auto pid = ParseDecimal<uint32_t>(mid.substr(0, dash));
  auto idx = ParseDecimal<uint64_t>(mid.substr(dash + 1));
  if (!pid || !idx) return std::nullopt;
  return JittedDsoName{*pid, *idx};
}

absl::StatusOr<JittedDso> ParseJittedDso(std::string& image, const std::string& path) {
  JittedDso out;
  out.path = path;
  out.file_size = image.size();
  out.name = ParseJittedDsoName(fs::path(path).filename().string());
  if (auto cut = TruncatedElf(image)) return absl::InvalidArgumentError(StrCat(path, ": ", *cut));
  auto elf = ingest::ReadElfSymbols(image);
  if (!elf.ok()) {
    return absl::InvalidArgumentError(StrCat(path, ": ", elf.status().message(),
                                             image.size() < 64 ? StrCat(" (only ", image.size(), " bytes)") : ""));
  }
  if (!elf->build_id || elf->build_id->empty()) {
    return absl::InvalidArgumentError(StrCat(path, ": no NT_GNU_BUILD_ID note (or a malformed one) in its SHT_NOTE "
                                             "sections"));
  }
  out.build_id = *elf->build_id;
  for (const auto& s : elf->symbols) {
    if (!s.name.empty()) {
      out.symbol = s.name;
      break;
    }
  }
  return out;
}

absl::StatusOr<JittedDso> ReadJittedDso(const std::string& path, size_t max_bytes) {
  std::error_code ec;
  auto st = fs::status(path, ec);
  if (!ec && fs::exists(st) && !fs::is_regular_file(st)) {
    return absl::InvalidArgumentError(StrCat(path, ": not a regular file"));
  }
  auto bytes = ReadFileBounded(path, max_bytes);
  if (!bytes.ok()) {
    if (absl::IsResourceExhausted(bytes.status())) {
      return absl::ResourceExhaustedError(
          StrCat(path, ": larger than ", max_bytes >> 20, " MiB: not a jitted DSO (they hold one function)"));
    }
    return bytes.status();
  }
  return ParseJittedDso(*bytes, path);
}

JittedDsoScan ExpandJittedDsoPaths(const std::vector<std::string>& paths) {
  JittedDsoScan out;
  std::set<std::string> seen;
  auto add = [&](std::vector<std::string> found) {
    std::sort(found.begin(), found.end());
    for (auto& f : found) {
      if (seen.insert(f).second) out.files.push_back(std::move(f));
    }
  };
  // Regular files named jitted-*.so directly in `dir`; subdirectories into `subdirs` when asked.
  auto list = [&](const std::string& dir, std::vector<std::string>& found, std::vector<std::string>* subdirs) {
    std::error_code ec;
    fs::directory_iterator it(dir, ec), end;
    for (; !ec && it != end; it.increment(ec)) {
      std::error_code ec2;
      const std::string name = it->path().filename().string();
      if (subdirs && it->is_directory(ec2)) {
        subdirs->push_back(it->path().string());
      } else if (LooksLikeJittedDso(name) && it->is_regular_file(ec2)) {
        found.push_back(it->path().string());
      }
    }
    if (ec) out.errors.push_back(absl::PermissionDeniedError(StrCat(dir, ": cannot list: ", ec.message())));
  };
  for (const std::string& p : paths) {
    std::error_code ec;
    auto st = fs::status(p, ec);
    if (ec || !fs::exists(st)) {
      out.errors.push_back(absl::NotFoundError(StrCat(p, ": no such file or directory")));
      continue;
    }
    if (!fs::is_directory(st)) {
      add({p});
      continue;
    }
    std::vector<std::string> found, subdirs;
    list(p, found, &subdirs);
    std::sort(subdirs.begin(), subdirs.end());
    for (const std::string& d : subdirs) list(d, found, nullptr);
    add(std::move(found));
  }
  return out;
}

std::string_view JitBuildIdSchemeEra(std::string_view scheme) {
  if (scheme == "md5-addr") return "perf <= 6.16 built with libcrypto (MD5 of load address + code)";
  if (scheme == "sha1-code") return "perf 6.17 (SHA-1 of the code: identical code, identical ID)";
  if (scheme == "sha1-symtab") return "perf with the Nov 2025 fix (SHA-1 of code + symtab + strtab)";
  if (scheme == "symdex") return "symdex jit export (unique per process instance and load)";
  return "unknown scheme";
}

absl::StatusOr<DsoMatch> JittedDsoMatcher::Match(const JittedDso& dso) {
  DsoMatch m;
  const std::string hex = dso.build_id.ToHex();
  auto count_with_id = [&]() -> absl::Status {
    ASSIGN_OR_RETURN(Stmt q, db_.Prepare("SELECT count(DISTINCT load_id) FROM jit_build_ids WHERE build_id=?"));
    q.Bind(1, hex);
    ASSIGN_OR_RETURN(bool row, q.Step());
    m.loads_with_id = row ? q.Int(0) : 0;
    return absl::OkStatus();
  };
  auto elsewhere = [&]() {
    return m.loads_with_id ? StrCat("; its build-ID is that of ", m.loads_with_id,
                                    " other ingested load(s): see 'symdex buildid ", hex, "'")
                           : std::string();
  };
  if (!dso.name) {
    m.status = "unnamed";
    RETURN_IF_ERROR(count_with_id());
    m.message = StrCat("file name is not jitted-<pid>-<code_index>.so: no load to compare with", elsewhere());
    return m;
  }
  if (!instances_) {
    ASSIGN_OR_RETURN(auto all, FindInstances(db_, std::nullopt));
    instances_.emplace();
    for (auto& i : all) (*instances_)[i.id] = std::move(i);
  }
  // (instance_id, code_index) is indexed; the IN list keeps the lookup on that index (an ORDER BY
  // file_offset would make SQLite walk every load of each instance instead: sorted below).
  ASSIGN_OR_RETURN(Stmt q, db_.Prepare("SELECT l.id, l.name, l.code_addr, l.code_size, l.time, l.file_offset, "
                                       "l.instance_id FROM jit_loads l WHERE l.instance_id IN "
                                       "(SELECT id FROM jit_instances) AND l.code_index=?2 AND l.pid=?1"));
  q.Bind(1, static_cast<int64_t>(dso.name->pid)).Bind(2, ToDb(dso.name->code_index));
  while (true) {
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) break;
    DsoLoadCandidate c;
    JitLoadInfo& l = c.load;
    l.load_id = q.Int(0);
    l.name = q.Text(1);
    l.code_addr = FromDb(q.Int(2));
    l.code_size = FromDb(q.Int(3));
    l.load_time = FromDb(q.Int(4));
    l.file_offset = FromDb(q.Int(5));
    l.pid = dso.name->pid;
    l.code_index = dso.name->code_index;
    l.addr = l.code_addr;
    l.placed_time = l.load_time;
    auto inst = instances_->find(q.Int(6));
    if (inst != instances_->end()) {
      l.instance = inst->second;
    } else {
      l.instance.id = q.Int(6);
    }
    m.candidates.push_back(std::move(c));
  }
  std::sort(m.candidates.begin(), m.candidates.end(), [](const DsoLoadCandidate& a, const DsoLoadCandidate& b) {
    return std::pair(a.load.instance.id, a.load.file_offset) < std::pair(b.load.instance.id, b.load.file_offset);
  });
  ASSIGN_OR_RETURN(Stmt ids, db_.Prepare("SELECT scheme, build_id FROM jit_build_ids WHERE load_id=? ORDER BY scheme"));
  bool any = false;
  for (DsoLoadCandidate& c : m.candidates) {
    ids.Reset();
    ids.Bind(1, c.load.load_id);
    while (true) {
      ASSIGN_OR_RETURN(bool row, ids.Step());
      if (!row) break;
      std::string scheme = ids.Text(0), id = ids.Text(1);
      if (id == hex) c.schemes.push_back(scheme);
      c.load.build_ids[scheme] = std::move(id);
    }
    c.symbol_matches = dso.symbol == c.load.name;
    any = any || !c.schemes.empty();
  }
  if (any) {
    m.status = "matched";
    return m;
  }
  RETURN_IF_ERROR(count_with_id());
  const std::string dso_name = StrCat("jitted-", dso.name->pid, "-", dso.name->code_index, ".so");
  if (m.candidates.empty()) {
    m.status = "no-load";
    m.message = StrCat("no such load ingested: no CODE_LOAD with pid ", dso.name->pid, " and code_index ",
                       dso.name->code_index, " (ingest jit-", dso.name->pid, ".dump with 'symdex jit ingest')",
                       elsewhere());
    return m;
  }
  m.status = "unknown";
  m.message = StrCat("the build-ID is none of the IDs (md5-addr, sha1-code, sha1-symtab, symdex) of the ",
                     m.candidates.size() == 1 ? "load" : StrCat(m.candidates.size(), " loads"), " named ", dso_name,
                     ": written by a perf without libcrypto (random IDs, e.g. Debian 12's perf 6.1), altered, or "
                     "from another process that reused the pid",
                     elsewhere());
  return m;
}

std::vector<SharedDsoId> SharedDsoIds(const std::vector<JittedDso>& dsos) {
  std::map<std::string, std::vector<size_t>> by_id;
  for (size_t i = 0; i < dsos.size(); ++i) by_id[dsos[i].build_id.ToHex()].push_back(i);
  std::vector<SharedDsoId> out;
  for (auto& [id, idx] : by_id) {
    if (idx.size() < 2) continue;
    std::set<std::string> names;
    for (size_t i : idx) names.insert(dsos[i].symbol);
    out.push_back(SharedDsoId{id, idx, std::vector<std::string>(names.begin(), names.end())});
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const SharedDsoId& a, const SharedDsoId& b) { return a.dsos.size() > b.dsos.size(); });
  return out;
}

}  // namespace symdex::jit
