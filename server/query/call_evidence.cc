#include "server/query/call_evidence.h"

#include <algorithm>

#include "server/common/strings.h"
#include "server/query/resolver.h"

namespace symdex::query {

debuginfo::CodeFile* CallEvidence::FileOf(const std::string& module) {
  if (auto it = files_.find(module); it != files_.end()) return it->second.get();
  std::unique_ptr<debuginfo::CodeFile>& f = files_[module];
  const std::string what = module.empty() ? std::string("vmlinux") : module;
  absl::StatusOr<std::shared_ptr<const store::DebugFileInfo>> df = debug_file_of_(module);
  if (!df.ok() || !*df) {
    if (unavailable_.empty()) unavailable_ = StrCat("no debug file for ", what, ": its code was not read");
    return nullptr;
  }
  absl::StatusOr<std::unique_ptr<debuginfo::CodeFile>> opened = debuginfo::CodeFile::Open((*df)->path);
  if (!opened.ok()) {
    if (unavailable_.empty()) unavailable_ = StrCat(what, "'s code: ", opened.status().message());
    return nullptr;
  }
  // A linked vmlinux is read at link-time addresses; a live target's are slid by KASLR (as the
  // resolver places them: no _text on either side, no slide).
  if (module.empty() && !(*opened)->relocatable()) {
    vmlinux_slide_ = (t_.text_addr && (*df)->text_addr) ? *t_.text_addr - *(*df)->text_addr : 0;
  }
  f = std::move(*opened);
  return f.get();
}

std::optional<CodePlace> CallEvidence::PlaceOf(const Instance& in, uint64_t off) {
  CodePlace p;
  p.module = in.module;
  if (in.module.empty()) {
    if (!in.addr || FileOf("") == nullptr) return std::nullopt;
    p.at = *in.addr - vmlinux_slide_ + off;
    return p;
  }
  if (!in.section.empty()) {
    p.section = in.section;
    p.at = in.section_offset + off;
    return p;
  }
  if (!in.addr) return std::nullopt;
  // A loaded module's symbol: the section whose base is the highest at or below it.
  absl::StatusOr<std::vector<std::pair<std::string, uint64_t>>> secs = sections_of_(in.module);
  if (!secs.ok()) return std::nullopt;
  const std::pair<std::string, uint64_t>* best = SectionHolding(*secs, *in.addr);
  if (best == nullptr) return std::nullopt;
  p.section = best->first;
  p.at = *in.addr - best->second + off;
  return p;
}

absl::StatusOr<std::optional<debuginfo::CallSite>> CallEvidence::CallAt(const CodePlace& p) {
  debuginfo::CodeFile* f = FileOf(p.module);
  if (f == nullptr) return absl::NotFoundError(unavailable_);
  return f->CallBefore(p.section, p.at);
}

std::optional<bool> CallEvidence::FollowsCall(const Instance& in, uint64_t off) {
  std::optional<CodePlace> p = PlaceOf(in, off);
  if (!p) return std::nullopt;
  absl::StatusOr<std::optional<debuginfo::CallSite>> c = CallAt(*p);
  if (!c.ok()) return std::nullopt;
  return c->has_value();
}

std::optional<Callee> CallEvidence::CalleeBefore(const Instance& in, uint64_t off) {
  std::optional<CodePlace> p = PlaceOf(in, off);
  if (!p) return std::nullopt;
  absl::StatusOr<std::optional<debuginfo::CallSite>> c = CallAt(*p);
  if (!c.ok() || !c->has_value() || !(*c)->insn.direct) return std::nullopt;
  const debuginfo::CallSite& site = **c;
  Callee out;
  out.symbol = site.target_symbol;
  if (site.target && (p->module.empty() || !site.target_section.empty())) {
    out.place = CodePlace{p->module, site.target_section, *site.target};
  }
  if (!out.place && out.symbol.empty()) return std::nullopt;
  return out;
}

bool CallEvidence::Starts(const Callee& callee, const Instance& k) {
  if (callee.place) {
    std::optional<CodePlace> at = PlaceOf(k, 0);
    return at && *at == *callee.place;
  }
  // A module's call into another file (vmlinux or another module): by the exported name.
  return !callee.symbol.empty() && k.name == callee.symbol;
}

}  // namespace symdex::query
