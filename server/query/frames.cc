// LocalQuery::Frames: frames from another host (answers.h says which forms are exact).
#include <algorithm>
#include <iterator>
#include <map>
#include <unordered_map>

#include "server/common/build_id.h"
#include "server/common/enum_names.h"
#include "server/common/strings.h"
#include "server/common/symbol_type.h"
#include "server/ingest/elf_notes.h"
#include "server/ingest/frame_text.h"
#include "server/query/call_evidence.h"
#include "server/query/local_query.h"
#include "server/query/local_query_impl.h"

namespace symdex::query {
namespace {

constexpr size_t kMaxSectionNameLength = 256;
// How much bigger than the ELF st_size the size a kernel prints (the gap to the next kallsyms
// symbol: alignment padding, __pfx_ prefixes) may be and still be the same function.
constexpr uint64_t kMaxPrintedSizeSlack = 64;
// Module offsets in one call from which each module's code symbols are read at once rather than
// looked up frame by frame (a module's table costs about what 100-300 single lookups do).
constexpr size_t kModuleTableFrames = 256;

std::string Hex(uint64_t v) { return fmt::format("0x{:x}", v); }

// Where a frame is to be answered from.
struct Plan {
  enum Kind { kDone, kTargetAddress, kModuleOffset } kind = kDone;
  uint64_t addr = 0;                  // kTargetAddress: in the target's own terms
  std::optional<uint64_t> host_addr;  // the host's address, when the frame gave one
  std::string module, section;
  uint64_t offset = 0;
  std::string expect_symbol;   // the name the frame line printed (checked against the answer)
  uint64_t expect_offset = 0;  // ... and the offset
  // A symbol+offset frame: the instance it is, or the copies it may still be (narrowed by Narrow).
  // (Held apart: a 10k-frame call makes 10k plans, nearly all of them address frames.)
  std::shared_ptr<const Instance> chosen;
  std::vector<Instance> choices;
  uint64_t sym_offset = 0;
  size_t named = 0;         // instances of the name in its module/vmlinux
  std::string where;        // "vmlinux" or the module
  std::string sized;        // ", N of size compatible with 0xSIZE" when the frame printed a size
  bool size_chose = false;  // the size left fewer copies than the name
  // The frame's source as the printing kernel gave it (CONFIG_KALLSYMS_LINEINFO); "" = none.
  std::string printed_file;
  uint32_t printed_line = 0;
};

// A source path the kernel printed names the file the debug info names: the same path, or one
// ends with the other after a '/' (a build prefix the kernel's table kept or left off).
bool SamePath(std::string_view a, std::string_view b) {
  if (a.empty() || b.empty()) return false;
  if (a.size() < b.size()) std::swap(a, b);
  return a.ends_with(b) && (a.size() == b.size() || a[a.size() - b.size() - 1] == '/');
}

// The answer's line-table row (its innermost frame) is the printed file, and the line (0 = any).
bool SaysSource(const AddressInfo& info, std::string_view file, uint32_t line) {
  return !info.frames.empty() && SamePath(info.frames.front().file, file) &&
         (line == 0 || info.frames.front().line == static_cast<int>(line));
}

}  // namespace

std::vector<size_t> StackCuts(const std::vector<FrameIn>& frames) {
  std::vector<size_t> out;
  size_t reach = 0;  // the furthest caller of the frames before k
  for (size_t k = 0; k < frames.size(); ++k) {
    if (k > 0 && reach < k) out.push_back(k);
    if (frames[k].caller) reach = std::max<size_t>(reach, *frames[k].caller);
  }
  return out;
}

const std::shared_ptr<const AddressInfo>& NoAddressInfo() {
  static const auto* none = new std::shared_ptr<const AddressInfo>(std::make_shared<const AddressInfo>());
  return *none;
}

namespace {
constexpr std::array<EnumName<FrameBasis>, 3> kFrameBasisNames = {{
    {FrameBasis::kAddress, "address"},
    {FrameBasis::kModuleOffset, "module-offset"},
    {FrameBasis::kSymbolOffset, "symbol+offset"},
}};
}  // namespace

std::string_view FrameBasisName(FrameBasis b) { return NameIn(kFrameBasisNames, b); }

std::string FramesTarget(const std::string& target, const FramesContext& ctx) {
  if (!target.empty() || ctx.kernel_build_id.empty()) return target;
  return StrCat(kBuildIdTargetPrefix, Lower(ctx.kernel_build_id));
}

absl::Status CheckFramesRequest(const FramesContext& ctx, size_t frames) {
  if (frames > kMaxAddressesPerRequest) {
    return absl::InvalidArgumentError(StrCat(frames, " frames in one request; the limit is ", kMaxAddressesPerRequest));
  }
  if (!ctx.kernel_build_id.empty()) {
    RETURN_IF_ERROR(CheckFieldSize("kernel_build_id", ctx.kernel_build_id, 128));
    if (!BuildId::FromHex(ctx.kernel_build_id)) {
      return absl::InvalidArgumentError("kernel_build_id is not a build-ID (hex digits, even count)");
    }
  }
  if (ctx.text && ctx.kaslr_offset) {
    return absl::InvalidArgumentError("give the host's _text or its KASLR offset, not both");
  }
  if (ctx.modules.size() > kMaxFrameModules) {
    return absl::InvalidArgumentError(
        StrCat(ctx.modules.size(), " modules in one request; the limit is ", kMaxFrameModules));
  }
  std::map<std::string_view, int> seen;
  for (const FrameModule& m : ctx.modules) {
    RETURN_IF_ERROR(CheckFieldSize("module name", m.name, kMaxModuleNameLength));
    if (m.name.empty()) return absl::InvalidArgumentError("a module without a name");
    if (++seen[m.name] > 1) return absl::InvalidArgumentError(StrCat("module ", m.name, " is given twice"));
    if (!m.build_id.empty() && (m.build_id.size() > 128 || !BuildId::FromHex(m.build_id))) {
      return absl::InvalidArgumentError(StrCat("module ", m.name, ": build_id is not a build-ID"));
    }
    if (m.sections.size() > kMaxSectionsPerModule) {
      return absl::InvalidArgumentError(
          StrCat("module ", m.name, ": ", m.sections.size(), " sections; the limit is ", kMaxSectionsPerModule));
    }
    for (const auto& [sec, base] : m.sections) {
      RETURN_IF_ERROR(CheckFieldSize("section name", sec, kMaxSectionNameLength));
      if (sec.empty()) return absl::InvalidArgumentError(StrCat("module ", m.name, ": a section without a name"));
    }
  }
  return absl::OkStatus();
}

// One call's state: the target, the host's layout, and per-call caches.
struct LocalQuery::FramesCall {
  FramesCall(LocalQuery& q, Session& s, const TargetInfo& t, Cache& cache, Cache* shared, const FramesContext& ctx)
      : q(q), s(s), t(t), ctx(ctx), sz(q, s, t, cache), shared(shared) {
    for (const FrameModule& m : ctx.modules) host_modules.emplace(m.name, &m);
  }

  // The host module whose section holds `addr` (the highest base at or below it), if any.
  std::optional<Plan> ModuleOf(uint64_t addr) const {
    // The section with the greatest base <= addr (the first given, among equal bases), by a
    // binary search over every module's sections, sorted once per call.
    if (section_order.empty()) {
      for (const FrameModule& m : ctx.modules) {
        for (const auto& sec : m.sections) section_order.push_back({sec.second, &m, &sec});
      }
      std::stable_sort(section_order.begin(), section_order.end(),
                       [](const PlacedSection& a, const PlacedSection& b) { return a.base < b.base; });
    }
    auto above = std::upper_bound(section_order.begin(), section_order.end(), addr,
                                  [](uint64_t a, const PlacedSection& p) { return a < p.base; });
    if (above == section_order.begin()) return std::nullopt;
    const uint64_t at = std::prev(above)->base;
    const PlacedSection& first = *std::lower_bound(section_order.begin(), above, at,
                                                   [](const PlacedSection& p, uint64_t b) { return p.base < b; });
    const FrameModule* best_m = first.module;
    const std::pair<std::string, uint64_t>* best = first.section;
    if (best_m->size) {
      uint64_t lo = UINT64_MAX;
      for (const auto& sec : best_m->sections) lo = std::min(lo, sec.second);
      if (addr - lo >= *best_m->size) return std::nullopt;
    }
    Plan p;
    p.kind = Plan::kModuleOffset;
    p.module = best_m->name;
    p.section = best->first;
    p.offset = addr - best->second;
    p.host_addr = addr;
    return p;
  }

  absl::StatusOr<std::optional<store::ModuleRecord>> TargetModule(const std::string& name) {
    if (auto it = target_modules.find(name); it != target_modules.end()) return it->second;
    ASSIGN_OR_RETURN(store::Db * db, s.Db());
    ASSIGN_OR_RETURN(auto m, store::FindModule(*db, t.id, name));
    return target_modules.emplace(name, std::move(m)).first->second;
  }

  // Why module `name` must not answer: its build-ID on the host (from the request or the frame
  // line) is not the target's. "" = it may.
  absl::StatusOr<std::string> BuildIdMismatch(const std::string& name, const std::string& line_id) {
    ASSIGN_OR_RETURN(auto tm, TargetModule(name));
    if (!tm) return std::string();
    // The frame line's own build-ID says which build printed it; else the request's module.
    std::string host_id = line_id;
    if (auto it = host_modules.find(name);
        host_id.empty() && it != host_modules.end() && !it->second->build_id.empty()) {
      host_id = Lower(it->second->build_id);
    }
    if (host_id.empty() || tm->build_id.empty() || host_id == tm->build_id) return std::string();
    return StrCat("module ", name, " on the host has build-ID ", host_id, "; the target's is ", tm->build_id,
                  ": not answered (a different build)");
  }

  // (module, section, offset) -> answer, for a module of the target.
  absl::Status AnswerModuleOffset(const Plan& p, FrameAnswer& a) {
    a.module = p.module;
    a.section = p.section;
    a.section_offset = p.offset;
    ASSIGN_OR_RETURN(std::string mismatch, BuildIdMismatch(p.module, ""));
    if (!mismatch.empty()) {
      a.exact = false;
      a.note = std::move(mismatch);
      return absl::OkStatus();
    }
    ASSIGN_OR_RETURN(auto tm, TargetModule(p.module));
    if (!tm) {
      a.exact = false;
      a.note = StrCat("module ", p.module, " is not indexed in target ", t.name,
                      " (a fleet request adds it by its build-ID)");
      return absl::OkStatus();
    }
    ASSIGN_OR_RETURN(store::Db * db, s.Db());
    if (tm->text_addr) {
      // A loaded module of a live target: its own section bases place the offset.
      ASSIGN_OR_RETURN(auto sections, store::ModuleSections(*db, t.id, p.module));
      for (const auto& [sec, base] : sections) {
        if (sec == p.section) {
          a.target_address = base + p.offset;
          ASSIGN_OR_RETURN(AddressInfo info, sz.At(base + p.offset));
          a.info = std::make_shared<const AddressInfo>(std::move(info));
          return absl::OkStatus();
        }
      }
      a.exact = false;
      a.note = StrCat("module ", p.module, " has no section ", p.section, " in target ", t.name);
      return absl::OkStatus();
    }
    store::Containment c;
    if (module_tables) {
      std::shared_ptr<const store::ModuleCodeSymbols>& table = module_symbols[p.module];
      if (!table) {
        ASSIGN_OR_RETURN(table, store::LoadModuleCodeSymbols(*db, t.id, p.module));
      }
      c = table->InSection(p.section, p.offset);
    } else {
      ASSIGN_OR_RETURN(c, store::SymbolInSection(*db, t.id, p.module, p.section, p.offset));
    }
    if (!c.symbol) {
      a.note = std::move(c.why);
      a.exact = false;
      return absl::OkStatus();
    }
    auto info = std::make_shared<AddressInfo>();
    a.info = info;
    info->symbol = InstanceOf(t, *c.symbol);
    info->offset = p.offset - c.symbol->addr;
    const Instance& in = *info->symbol;
    if (std::string_view padded = PaddedFunction(in); !padded.empty()) {
      info->note = PaddingNote(padded);
      return absl::OkStatus();
    }
    ASSIGN_OR_RETURN(auto df, sz.debug_file_of(p.module));
    if (!df) {
      info->note = "no debug info for this module";
    } else {
      absl::StatusOr<std::vector<Frame>> frames;
      {
        std::lock_guard<std::mutex> l(q.sym_mu_);
        q.last_dwarf_use_ = std::chrono::steady_clock::now().time_since_epoch().count();
        frames = q.symbolizer_.SymbolizeInSection(df->path, df->build_id, p.section,
                                                  c.symbol->addr + CodeOffset(t, in, info->offset));
      }
      if (frames.ok()) {
        info->frames = std::move(*frames);
        if (!info->frames.empty() && in.name.starts_with(info->frames.back().function + ".")) {
          info->frames.back().function = in.name;
        }
        if (info->frames.empty()) info->frames.push_back({in.name, "", 0, 0});
        if (info->frames.back().function.empty()) info->frames.back().function = in.name;
        return absl::OkStatus();
      }
      info->note = std::string(frames.status().message());
    }
    if (in.dwarf && in.dwarf->entry_line > 0 && info->offset == 0) {
      info->frames.push_back({in.dwarf->has_function ? in.dwarf->function : in.name, in.dwarf->entry_file,
                              static_cast<int>(in.dwarf->entry_line), 0});
    }
    return absl::OkStatus();
  }

  // NAME+OFF[/SIZE] [MODULE] -> a plan, or the candidates when it names several instances.
  absl::StatusOr<Plan> PlanSymbol(const ingest::FrameText& f, FrameAnswer& a) {
    Plan p;
    ASSIGN_OR_RETURN(std::string mismatch,
                     f.module.empty() ? std::string() : BuildIdMismatch(f.module, f.module_build_id));
    if (!mismatch.empty()) {
      a.note = std::move(mismatch);
      return p;
    }
    ASSIGN_OR_RETURN(auto list, sz.src.Which(f.symbol, false));
    std::vector<const Instance*> named;
    for (const Instance& in : *list) {
      if (in.module == f.module && IsCodeSymbolType(in.type)) named.push_back(&in);
    }
    const std::string where = f.module.empty() ? "vmlinux" : f.module;
    if (named.empty()) {
      a.note = StrCat("no code symbol ", f.symbol, " in ", where, " of target ", t.name);
      return p;
    }
    std::vector<const Instance*> fit = named;
    if (named.size() > 1 && f.size) {
      fit.clear();
      for (const Instance* in : named) {
        if (!in->size) continue;
        bool ok = in->size_exact ? (*f.size >= *in->size && *f.size - *in->size < kMaxPrintedSizeSlack)
                                 : *in->size == *f.size;
        if (ok) fit.push_back(in);
      }
    }
    p.sym_offset = f.offset;
    p.named = named.size();
    p.where = where;
    if (named.size() > 1 && f.size) p.sized = StrCat(", ", fit.size(), " of size compatible with ", Hex(*f.size));
    p.size_chose = fit.size() < named.size();
    if (fit.size() != 1) {
      for (const Instance* in : (fit.empty() ? named : fit)) {
        ASSIGN_OR_RETURN(std::string c, Canonical(*in));
        a.candidates.push_back(std::move(c));
        p.choices.push_back(*in);
      }
      a.note = StrCat(named.size(), " instances of ", f.symbol, " in ", where, p.sized,
                      ": ambiguous without the address (give the frame's address and the host's _text)");
      return p;
    }
    Place(*fit.front(), named.size() == 1 ? "" : "its size", p, a);
    return p;
  }

  // The frame is `in` (+ p.sym_offset): `how` it was chosen among p.named copies ("" = the only one).
  static void Place(const Instance& in, std::string_view how, Plan& p, FrameAnswer& a) {
    a.exact = how.empty();
    a.candidates.clear();
    a.note = how.empty() ? std::string()
                         : StrCat("chosen by ", how, " among ", p.named, " instances of ", in.name, " in ", p.where);
    if (in.size && p.sym_offset >= *in.size && in.size_exact) {
      a.exact = false;
      a.note += StrCat(a.note.empty() ? "" : "; ", "offset ", Hex(p.sym_offset), " is past the symbol's size ",
                       Hex(*in.size));
    }
    p.chosen = std::make_shared<const Instance>(in);
    p.choices.clear();
    if (in.addr) {
      p.kind = Plan::kTargetAddress;
      p.addr = *in.addr + p.sym_offset;
    } else {
      p.kind = Plan::kModuleOffset;
      p.module = in.module;
      p.section = in.section;
      p.offset = in.section_offset + p.sym_offset;
    }
  }

  // Where a copy's code `off` bytes in is in the source (leaf first), as its answer would say.
  absl::StatusOr<std::shared_ptr<const AddressInfo>> SourceAt(const Instance& in, uint64_t off) {
    if (in.addr) {
      ASSIGN_OR_RETURN(AddressInfo info, sz.At(*in.addr + off));
      return std::make_shared<const AddressInfo>(std::move(info));
    }
    Plan p;
    p.kind = Plan::kModuleOffset;
    p.module = in.module;
    p.section = in.section;
    p.offset = in.section_offset + off;
    FrameAnswer a;
    RETURN_IF_ERROR(AnswerModuleOffset(p, a));
    return a.info;
  }

  // The copy's code at the frame says the printed file (and line, unless 0): looked up where the
  // answer looks (a return address one byte back, in its call).
  absl::StatusOr<bool> PrintedSourceFits(const Instance& in, const Plan& p, bool return_address, uint32_t line) {
    const uint64_t back = return_address && p.sym_offset > 0 ? 1 : 0;
    ASSIGN_OR_RETURN(auto info, SourceAt(in, p.sym_offset - back));
    return SaysSource(*info, p.printed_file, line);
  }

  // Frames of one stack narrow each other's candidates (call_evidence.h). Each test keeps the
  // copies that pass it, and is ignored when none does (a tail call, a frame that is not what
  // its stack says): evidence only ever chooses among copies the name and size allow.
  absl::Status Narrow(const std::vector<FrameIn>& frames, std::vector<Plan>& plans, std::vector<FrameAnswer>& out) {
    if (std::none_of(plans.begin(), plans.end(), [](const Plan& p) { return p.choices.size() > 1; })) {
      return absl::OkStatus();
    }
    CallEvidence code(t, sz.debug_file_of, sz.sections_of);  // opens files only when asked
    std::vector<std::vector<size_t>> callees(frames.size());
    for (size_t i = 0; i < frames.size(); ++i) {
      if (frames[i].caller) callees[*frames[i].caller].push_back(i);
    }
    std::vector<std::vector<std::string>> how(frames.size());
    for (int round = 0; round < 4; ++round) {
      bool progress = false;
      for (size_t i = 0; i < frames.size(); ++i) {
        Plan& p = plans[i];
        if (p.choices.size() < 2) continue;
        const size_t before = p.choices.size();
        auto keep = [&](std::string_view why, auto&& pass) {
          std::vector<Instance> kept;
          for (const Instance& in : p.choices) {
            if (pass(in)) kept.push_back(in);
          }
          if (!kept.empty() && kept.size() < p.choices.size()) {
            p.choices = std::move(kept);
            how[i].emplace_back(why);
          }
        };
        keep("its offset fitting",
             [&](const Instance& in) { return !(in.size && in.size_exact && p.sym_offset >= *in.size); });
        // The printing kernel's own file:line (CONFIG_KALLSYMS_LINEINFO): the copy whose code
        // there is that line; else (a log of another build, lines moved) that file.
        if (!p.printed_file.empty()) {
          absl::Status failed;
          auto fits = [&](uint32_t line) {
            return [&, line](const Instance& in) {
              absl::StatusOr<bool> ok = PrintedSourceFits(in, p, frames[i].return_address, line);
              if (!ok.ok() && failed.ok()) failed = ok.status();
              return ok.value_or(false);
            };
          };
          keep("its printed source line", fits(p.printed_line));
          keep("its printed source file", fits(0));
          RETURN_IF_ERROR(failed);
        }
        if (frames[i].return_address) {
          keep("the call before its return address",
               [&](const Instance& in) { return code.FollowsCall(in, p.sym_offset).value_or(false); });
        }
        // Its caller's call lands on the copy's start.
        if (frames[i].caller && plans[*frames[i].caller].chosen && frames[*frames[i].caller].return_address) {
          const Plan& c = plans[*frames[i].caller];
          if (std::optional<Callee> callee = code.CalleeBefore(*c.chosen, c.sym_offset)) {
            keep("its caller's call", [&](const Instance& in) { return code.Starts(*callee, in); });
          }
        }
        // The copy's call before its return address lands on the frame it called.
        if (frames[i].return_address) {
          for (size_t k : callees[i]) {
            if (!plans[k].chosen) continue;
            keep("its call to the frame above", [&](const Instance& in) {
              std::optional<Callee> callee = code.CalleeBefore(in, p.sym_offset);
              return callee && code.Starts(*callee, *plans[k].chosen);
            });
          }
        }
        if (p.choices.size() == before) continue;
        progress = true;
        FrameAnswer& a = out[i];
        if (p.choices.size() == 1) {
          Instance in = p.choices.front();
          Place(in, StrCat(p.size_chose ? "its size, " : "", StrJoin(how[i], " and ")), p, a);
          continue;
        }
        a.candidates.clear();
        for (const Instance& in : p.choices) {
          ASSIGN_OR_RETURN(std::string cs, Canonical(in));
          a.candidates.push_back(std::move(cs));
        }
        a.note = StrCat(p.named, " instances of ", p.choices.front().name, " in ", p.where, p.sized, ", ",
                        p.choices.size(), " left by ", StrJoin(how[i], " and "), ": ambiguous without the address");
      }
      if (!progress) break;
    }
    for (size_t i = 0; i < frames.size(); ++i) {
      if (plans[i].choices.size() > 1 && !code.unavailable().empty()) {
        out[i].note += StrCat(" (", code.unavailable(), ")");
      }
    }
    return absl::OkStatus();
  }

  // The canonical spec of the instance `brief` names, from the target generation's cache when
  // the query keeps one (the same entries ResolveIn keeps: group name + instance identity).
  absl::StatusOr<std::string> Canonical(const Instance& brief) {
    const CanonicalKeyView key = CanonicalKeyView::Of(brief.name, brief);
    if (shared != nullptr) {
      std::lock_guard<std::mutex> l(shared->mu);
      if (auto it = shared->canonical.find(key); it != shared->canonical.end()) return it->second;
    } else if (auto it = canonical.find(key); it != canonical.end()) {
      return it->second;
    }
    // A name only this symbol carries (most of them) is its own spec: counted in the name
    // index, not listed with every instance's DWARF.
    ASSIGN_OR_RETURN(store::Db * db, s.Db());
    ASSIGN_OR_RETURN(int64_t named, store::CountSymbolsNamed(*db, t.id, brief.name));
    std::string c;
    if (named == 1) {
      c = CanonicalSpec(brief, {brief});
    } else {
      ASSIGN_OR_RETURN(auto list, sz.src.Which(brief.name, false));
      std::vector<Instance> group;
      const Instance* self = nullptr;
      for (const Instance& in : *list) {
        if (IsCodeSymbolType(in.type)) group.push_back(in);
      }
      for (const Instance& in : group) {
        if (SamePlace(in, brief)) {
          self = &in;
        }
      }
      c = CanonicalSpec(self ? *self : brief, group);
    }
    if (shared != nullptr) {
      std::lock_guard<std::mutex> l(shared->mu);
      if (shared->canonical.size() >= q.opts_.max_cached_names) shared->canonical.clear();
      shared->canonical.emplace(CanonicalKey(key), c);
      return c;
    }
    return canonical.emplace(CanonicalKey(key), std::move(c)).first->second;
  }

  // The steps of LocalQuery::Frames, in order. Each frame's plan: an address in the target (the
  // host's less `slide`), a module offset, or a symbol+offset with the copies it may be.
  absl::Status PlanFrames(const std::vector<FrameIn>& frames, std::optional<int64_t> slide, bool own_addresses,
                          std::vector<FrameAnswer>& answers, std::vector<Plan>& plans);
  // The plans that are target addresses, answered in one symbolization batch (an address in no
  // symbol of vmlinux becomes its host module's offset, when the host said where its modules are).
  absl::Status AnswerAddresses(const std::vector<FrameIn>& frames, std::vector<Plan>& plans,
                               std::vector<FrameAnswer>& answers);
  absl::Status AnswerModuleOffsets(const std::vector<FrameIn>& frames, std::vector<Plan>& plans,
                                   std::vector<FrameAnswer>& answers);
  // Each answer against what its frame line printed: the source line, the symbol's name.
  absl::Status CheckAgainstTheLines(const std::vector<FrameIn>& frames, const std::vector<Plan>& plans,
                                    std::vector<FrameAnswer>& answers);

  LocalQuery& q;
  Session& s;
  const TargetInfo& t;
  const FramesContext& ctx;
  Symbolizing sz;
  Cache* shared;  // the generation's cache (null: the CLI's uncached mode)
  std::map<std::string, const FrameModule*> host_modules;
  std::map<std::string, std::optional<store::ModuleRecord>> target_modules;
  struct PlacedSection {
    uint64_t base;
    const FrameModule* module;
    const std::pair<std::string, uint64_t>* section;
  };
  mutable std::vector<PlacedSection> section_order;  // ModuleOf's index over ctx.modules
  // A batch with many module offsets reads each module's code symbols once (kModuleTableFrames).
  bool module_tables = false;
  std::map<std::string, std::shared_ptr<const store::ModuleCodeSymbols>> module_symbols;
  CanonicalCache canonical;
};

namespace {

// A return address is looked up one byte back, in the call that pushed it: its line is the
// call's (as the kernel's %pB and perf do), not the next statement's.
uint64_t LookBack(const FrameIn& f) { return f.return_address ? 1 : 0; }
// ... and the offset shown stays the frame's.
void Forward(FrameAnswer& a, uint64_t by) {
  if (by == 0 || !a.info->symbol) return;
  auto moved = std::make_shared<AddressInfo>(*a.info);
  moved->offset += by;
  a.info = std::move(moved);
}

absl::Status CheckFrames(const std::string& target, const FramesContext& ctx, const std::vector<FrameIn>& frames) {
  RETURN_IF_ERROR(CheckFieldSize("target", target, kMaxTargetNameLength));
  RETURN_IF_ERROR(CheckFramesRequest(ctx, frames.size()));
  for (const FrameIn& f : frames) {
    RETURN_IF_ERROR(CheckFieldSize("frame text", f.text, ingest::kMaxFrameLineLength));
    RETURN_IF_ERROR(CheckFieldSize("frame module", f.module, kMaxModuleNameLength));
    RETURN_IF_ERROR(CheckFieldSize("frame section", f.section, kMaxSectionNameLength));
    if (f.caller && (*f.caller >= frames.size() || &frames[*f.caller] == &f)) {
      return absl::InvalidArgumentError(StrCat("a frame's caller is frame ", *f.caller, ": not another frame of the ",
                                               frames.size(), " in the request"));
    }
  }
  return absl::OkStatus();
}

// host address - slide = the target's address (vmlinux); nullopt when the host gave neither its
// _text nor a KASLR offset.
absl::StatusOr<std::optional<int64_t>> SlideOf(const TargetInfo& t, const FramesContext& ctx) {
  if (ctx.text) {
    // The host's value of the target's anchor: _text, or _stext where kallsyms lists no _text.
    if (!t.AnchorAddr()) {
      return absl::FailedPreconditionError(StrCat("target ", t.name, " has no _text: give a KASLR offset"));
    }
    return std::optional<int64_t>(static_cast<int64_t>(*ctx.text - *t.AnchorAddr()));
  }
  if (ctx.kaslr_offset) {
    if (t.kind != "offline") {
      return absl::FailedPreconditionError(
          StrCat("target ", t.name, " is a live host: its addresses are already slid; give the host's _text instead"));
    }
    return std::optional<int64_t>(*ctx.kaslr_offset);
  }
  return std::optional<int64_t>();
}

}  // namespace

absl::Status LocalQuery::FramesCall::PlanFrames(const std::vector<FrameIn>& frames, std::optional<int64_t> slide,
                                                bool own_addresses, std::vector<FrameAnswer>& answers,
                                                std::vector<Plan>& plans) {
  const std::string unslid_note =
      own_addresses ? ""
                    : "no _text or KASLR offset given: taken as the target's link-time address (exact only "
                      "if the host booted without KASLR)";
  auto plan_address = [&](uint64_t host, FrameAnswer& a) {
    Plan p;
    p.kind = Plan::kTargetAddress;
    p.host_addr = host;
    p.addr = host - static_cast<uint64_t>(slide.value_or(0));
    a.basis = FrameBasis::kAddress;
    a.exact = slide || own_addresses;
    if (!a.exact) a.note = unslid_note;
    return p;
  };
  for (size_t i = 0; i < frames.size(); ++i) {
    const FrameIn& f = frames[i];
    FrameAnswer& a = answers[i];
    const int forms = (f.address ? 1 : 0) + (f.offset ? 1 : 0) + (f.text.empty() ? 0 : 1);
    if (forms != 1) {
      a.error = "a frame is exactly one of: an address, a module offset (module + offset), a frame line";
      continue;
    }
    if (f.address) {
      plans[i] = plan_address(*f.address, a);
    } else if (f.offset) {
      if (f.module.empty()) {
        a.error = "a module offset needs its module";
        continue;
      }
      plans[i].kind = Plan::kModuleOffset;
      plans[i].module = f.module;
      plans[i].section = f.section.empty() ? ".text" : f.section;
      plans[i].offset = *f.offset;
      a.basis = FrameBasis::kModuleOffset;
      a.exact = true;
    } else {
      absl::StatusOr<ingest::FrameText> ft = ingest::ParseFrameText(f.text);
      if (!ft.ok()) {
        a.error = std::string(ft.status().message());
        continue;
      }
      // The address is exact when this host's layout is known; otherwise symbol+offset is.
      // (A module's address needs that module's base: the slide places vmlinux only.)
      const bool placeable = ft->address && (own_addresses || ModuleOf(*ft->address) || (slide && ft->module.empty()));
      if (placeable || (ft->address && ft->symbol.empty())) {
        plans[i] = plan_address(*ft->address, a);
        plans[i].expect_symbol = ft->symbol;
        plans[i].expect_offset = ft->offset;
      } else {
        a.basis = FrameBasis::kSymbolOffset;
        ASSIGN_OR_RETURN(plans[i], PlanSymbol(*ft, a));
      }
      plans[i].printed_file = std::move(ft->source_file);
      plans[i].printed_line = ft->source_line;
    }
  }
  return absl::OkStatus();
}

absl::Status LocalQuery::FramesCall::AnswerAddresses(const std::vector<FrameIn>& frames, std::vector<Plan>& plans,
                                                     std::vector<FrameAnswer>& answers) {
  std::vector<uint64_t> batch;
  std::vector<size_t> batch_of;
  for (size_t i = 0; i < plans.size(); ++i) {
    if (plans[i].kind == Plan::kTargetAddress) {
      batch.push_back(plans[i].addr - LookBack(frames[i]));
      batch_of.push_back(i);
    }
  }
  if (batch.empty()) return absl::OkStatus();
  // The canonical spec cached with each answer; those made here are cached with it after.
  std::vector<std::string> canonical;
  std::vector<const AddressInfo*> made_for;
  ASSIGN_OR_RETURN(SymbolizeResult r, q.SymbolizeWith(s, t.name, batch, &canonical));
  made_for.assign(batch.size(), nullptr);
  for (size_t k = 0; k < batch.size(); ++k) {
    const size_t i = batch_of[k];
    FrameAnswer& a = answers[i];
    if (!r.results[k]->symbol && plans[i].host_addr) {
      // Not in vmlinux: a module's, when the host said where its modules are.
      if (std::optional<Plan> m = ModuleOf(*plans[i].host_addr)) {
        m->expect_symbol = plans[i].expect_symbol;
        m->expect_offset = plans[i].expect_offset;
        plans[i] = std::move(*m);
        a.exact = true;
        a.note.clear();
        continue;
      }
    }
    a.info = r.results[k];
    if (a.info->symbol) {
      if (canonical[k].empty()) {
        ASSIGN_OR_RETURN(canonical[k], Canonical(*a.info->symbol));
        made_for[k] = a.info.get();
        a.canonical = canonical[k];  // and cached below
      } else {
        a.canonical = std::move(canonical[k]);
      }
    }
    Forward(a, LookBack(frames[i]));
    a.target_address = plans[i].addr;
    if (!a.info->symbol) a.exact = false;
    plans[i].kind = Plan::kDone;
  }
  q.CacheCanonical(t, batch, made_for, canonical);
  return absl::OkStatus();
}

absl::Status LocalQuery::FramesCall::AnswerModuleOffsets(const std::vector<FrameIn>& frames, std::vector<Plan>& plans,
                                                         std::vector<FrameAnswer>& answers) {
  module_tables = static_cast<size_t>(std::count_if(plans.begin(), plans.end(), [](const Plan& p) {
                    return p.kind == Plan::kModuleOffset;
                  })) >= kModuleTableFrames;
  for (size_t i = 0; i < plans.size(); ++i) {
    if (plans[i].kind != Plan::kModuleOffset) continue;
    Plan at = plans[i];
    const uint64_t by = std::min(LookBack(frames[i]), at.offset);
    at.offset -= by;
    RETURN_IF_ERROR(AnswerModuleOffset(at, answers[i]));
    answers[i].section_offset += by;
    if (answers[i].target_address) *answers[i].target_address += by;
    Forward(answers[i], by);
  }
  return absl::OkStatus();
}

absl::Status LocalQuery::FramesCall::CheckAgainstTheLines(const std::vector<FrameIn>& frames,
                                                          const std::vector<Plan>& plans,
                                                          std::vector<FrameAnswer>& answers) {
  for (size_t i = 0; i < plans.size(); ++i) {
    FrameAnswer& a = answers[i];
    if (!a.info->symbol) {
      a.exact = false;
      if (a.note.empty()) a.note = a.info->note;
      continue;
    }
    if (a.canonical.empty()) {
      ASSIGN_OR_RETURN(a.canonical, Canonical(*a.info->symbol));
    }
    // The printing kernel's file:line against the debug info's: another file is another build
    // (or a wrong target), not this frame; another line alone, lines that moved.
    if (const Plan& p = plans[i];
        !p.printed_file.empty() && !a.info->frames.empty() && !SaysSource(*a.info, p.printed_file, p.printed_line)) {
      const Frame& leaf = a.info->frames.front();
      const bool same_file = SaysSource(*a.info, p.printed_file, 0);
      if (!same_file) a.exact = false;
      a.note = StrCat(a.note, a.note.empty() ? "" : "; ", "the log prints ", p.printed_file, ":", p.printed_line,
                      ", the debug info says ", leaf.file.empty() ? "no file" : leaf.file, ":", leaf.line,
                      same_file ? "" : " (a log of another build?)");
    }
    if (!plans[i].expect_symbol.empty() && plans[i].expect_symbol != a.info->symbol->name) {
      // Another name of the same code (kallsyms aliases: __x64_sys_vfork = __do_sys_vfork) is
      // no disagreement.
      const Instance& got = *a.info->symbol;
      ASSIGN_OR_RETURN(auto named, sz.src.Which(plans[i].expect_symbol, false));
      const bool alias = std::any_of(named->begin(), named->end(), [&](const Instance& in) {
        return in.name == plans[i].expect_symbol && SamePlace(in, got);
      });
      if (alias) continue;
      if (frames[i].return_address && plans[i].expect_offset == 0) {
        // The call was the caller's last instruction (a noreturn call): its return address is
        // the next symbol's start, which the line names; the call is in this one.
        a.note = StrCat(a.note, a.note.empty() ? "" : "; ", "the return address is where ", plans[i].expect_symbol,
                        " starts: the call is the last instruction of ", got.name);
        continue;
      }
      a.exact = false;
      a.note = StrCat(a.note, a.note.empty() ? "" : "; ", "the line says ", plans[i].expect_symbol,
                      "; the address is in ", a.info->symbol->name, " (wrong _text or module base?)");
    }
  }
  return absl::OkStatus();
}

absl::Status SymbolizeFrames::Check(const FramesRequest& r) { return CheckFramesRequest(r.ctx, r.frames.size()); }

absl::StatusOr<FramesResult> SymbolizeFrames::Local(LocalQuery& q, const FramesRequest& r) {
  return q.Frames(r.target, r.ctx, r.frames);
}

absl::StatusOr<std::vector<FramesRequest>> SymbolizeFrames::ConcurrentParts(const FramesRequest& r) {
  if (r.frames.size() > kMaxAddressesPerRequest) {
    return absl::InvalidArgumentError(
        StrCat(r.frames.size(), " frames in one request; the limit is ", kMaxAddressesPerRequest));
  }
  const size_t want = std::clamp<size_t>(r.frames.size() / kFramesPerPart, 1, kMaxParts);
  std::vector<size_t> cut{0};
  if (want > 1) {
    // Even parts, each cut moved forward to where no stack is split (a stack's frames narrow each
    // other: one call must see them all).
    const std::vector<size_t> cuts = StackCuts(r.frames);
    for (size_t i = 1; i < want; ++i) {
      auto at = std::lower_bound(cuts.begin(), cuts.end(), std::max(cut.back() + 1, r.frames.size() * i / want));
      if (at == cuts.end()) break;
      cut.push_back(*at);
    }
  }
  if (cut.size() == 1) return std::vector<FramesRequest>{r};
  cut.push_back(r.frames.size());
  std::vector<FramesRequest> parts;
  for (size_t i = 0; i + 1 < cut.size(); ++i) {
    FramesRequest& p = parts.emplace_back(FramesRequest{r.target, r.ctx, {}});
    p.frames.assign(r.frames.begin() + static_cast<ptrdiff_t>(cut[i]),
                    r.frames.begin() + static_cast<ptrdiff_t>(cut[i + 1]));
    for (FrameIn& f : p.frames) {
      if (f.caller) *f.caller -= static_cast<uint32_t>(cut[i]);
    }
  }
  return parts;
}

absl::Status SymbolizeFrames::Join(FramesResult& whole, FramesResult&& part, const FramesRequest& asked, bool first) {
  if (part.frames.size() != asked.frames.size()) {
    return absl::DataLossError(
        StrCat("symdexd answered ", part.frames.size(), " frames for a part of ", asked.frames.size()));
  }
  if (first) {
    whole = std::move(part);
  } else if (part.target.name != whole.target.name || part.target.generation != whole.target.generation) {
    // Re-indexed (or another replica) between the parts: one answer must come from one generation.
    return absl::AbortedError(std::string(kPartsSawTwoGenerations));
  } else {
    std::move(part.frames.begin(), part.frames.end(), std::back_inserter(whole.frames));
  }
  return absl::OkStatus();
}

absl::StatusOr<FramesResult> LocalQuery::Frames(const std::string& target, const FramesContext& ctx,
                                                const std::vector<FrameIn>& frames) {
  RETURN_IF_ERROR(CheckFrames(target, ctx, frames));
  return WithSession([&](Session& s) -> absl::StatusOr<FramesResult> {
    ASSIGN_OR_RETURN(auto t, PickTarget(s, FramesTarget(target, ctx)));
    if (!ctx.kernel_build_id.empty() && Lower(ctx.kernel_build_id) != t.build_id) {
      return absl::FailedPreconditionError(StrCat("the host's kernel has build-ID ", Lower(ctx.kernel_build_id),
                                                  "; target ", t.name, " is build-ID ",
                                                  t.build_id.empty() ? std::string("(unknown)") : t.build_id));
    }
    ASSIGN_OR_RETURN(const std::optional<int64_t> slide, SlideOf(t, ctx));
    const bool own_addresses = t.kind == "live" && !slide;
    auto cache = CacheFor(t);
    Cache scratch;
    FramesCall call(*this, s, t, cache ? *cache : scratch, cache.get(), ctx);
    FramesResult out{t, std::vector<FrameAnswer>(frames.size())};
    std::vector<Plan> plans(frames.size());
    RETURN_IF_ERROR(call.PlanFrames(frames, slide, own_addresses, out.frames, plans));
    RETURN_IF_ERROR(call.Narrow(frames, plans, out.frames));
    RETURN_IF_ERROR(call.AnswerAddresses(frames, plans, out.frames));  // vmlinux's (and a live target's own)
    RETURN_IF_ERROR(call.AnswerModuleOffsets(frames, plans, out.frames));
    RETURN_IF_ERROR(call.CheckAgainstTheLines(frames, plans, out.frames));
    return out;
  });
}

static_assert(kMaxFrameTextLength == ingest::kMaxFrameLineLength);

absl::StatusOr<std::string> NotesBuildId(std::string_view notes) {
  ASSIGN_OR_RETURN(std::optional<BuildId> id, ingest::FindGnuBuildId(notes));
  if (!id) return absl::InvalidArgumentError("no GNU build-ID note");
  return id->ToHex();
}

}  // namespace symdex::query
