#include "server/query/pprof.h"

#include <algorithm>
#include <map>

#include "server/common/build_id.h"
#include "server/common/strings.h"
#include "server/ingest/decompress.h"
#include "server/ingest/pprof_wire.h"
#include "server/query/local_query.h"

namespace symdex::query {
namespace {

// What a mapping is to the kernel: vmlinux, a module (its name), or neither.
struct KernelMapping {
  bool vmlinux = false;
  std::string module;
};

std::optional<KernelMapping> KernelMappingOf(const std::string& filename) {
  std::string_view f = filename;
  if (f.starts_with("[kernel.kallsyms]") || f == "[kernel]") return KernelMapping{true, ""};
  std::string_view base = f.substr(f.rfind('/') == std::string_view::npos ? 0 : f.rfind('/') + 1);
  if (base == "vmlinux" || base.starts_with("vmlinux-")) return KernelMapping{true, ""};
  std::string name;
  if (f.size() > 2 && f.front() == '[' && f.back() == ']') {
    name = std::string(f.substr(1, f.size() - 2));
    // perf's pseudo-mappings are not modules.
    for (std::string_view no : {"vdso", "vsyscall", "stack", "heap", "vvar", "anon", "unknown", "uprobes"}) {
      if (std::string_view(name).starts_with(no)) return std::nullopt;
    }
  } else {
    for (std::string_view ext : {".ko", ".ko.xz", ".ko.zst", ".ko.gz"}) {
      if (base.ends_with(ext)) name = std::string(base.substr(0, base.size() - ext.size()));
    }
  }
  if (name.empty() || name.size() > 64) return std::nullopt;
  for (char& c : name) {
    if (c == '-') c = '_';
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_')) {
      return std::nullopt;
    }
  }
  return KernelMapping{false, name};
}

bool IsHexId(const std::string& s) { return !s.empty() && s.size() <= 128 && BuildId::FromHex(s).has_value(); }

}  // namespace

absl::StatusOr<PprofResult> SymbolizePprof(QueryApi& api, const PprofRequest& req) {
  std::string raw;
  std::string_view bytes = req.profile;
  if (ingest::DetectCompression(bytes) == ingest::Compression::kGzip) {
    absl::StatusOr<std::string> d = ingest::Decompress(bytes, ingest::Compression::kGzip, ingest::kMaxPprofBytes);
    if (!d.ok()) return absl::InvalidArgumentError(StrCat("profile: ", d.status().message()));
    raw = std::move(*d);
    bytes = raw;
  }
  ASSIGN_OR_RETURN(ingest::PprofProfile p, ingest::ParsePprof(bytes));
  PprofResult out;
  out.samples = p.samples;
  out.locations = p.locations.size();

  FramesContext ctx;
  ctx.kernel_build_id = req.kernel_build_id;
  ctx.text = req.host_text;
  ctx.kaslr_offset = req.kaslr_offset;
  std::map<uint64_t, KernelMapping> kernel;  // mapping id ->
  std::vector<uint64_t> symbolized_mappings;
  for (const ingest::PprofMapping& m : p.mappings) {
    std::optional<KernelMapping> k = KernelMappingOf(m.filename);
    if (!k) continue;
    kernel[m.id] = *k;
    symbolized_mappings.push_back(m.id);
    const std::string id = Lower(m.build_id);
    if (k->vmlinux) {
      if (ctx.kernel_build_id.empty() && req.target.empty() && IsHexId(id)) ctx.kernel_build_id = id;
      continue;
    }
    if (std::any_of(ctx.modules.begin(), ctx.modules.end(),
                    [&](const FrameModule& fm) { return fm.name == k->module; })) {
      continue;
    }
    FrameModule fm;
    fm.name = k->module;
    if (IsHexId(id)) fm.build_id = id;
    if (m.memory_start != 0) fm.sections.emplace_back(".text", m.memory_start);
    if (m.memory_limit > m.memory_start) fm.size = m.memory_limit - m.memory_start;
    if (ctx.modules.size() < kMaxFrameModules) ctx.modules.push_back(std::move(fm));
  }
  RETURN_IF_ERROR(CheckFramesRequest(ctx, 0));
  std::vector<size_t> which;  // index into p.locations of each frame asked
  std::vector<FrameIn> frames;
  for (size_t i = 0; i < p.locations.size(); ++i) {
    const ingest::PprofLocation& l = p.locations[i];
    if (!kernel.count(l.mapping_id) || l.address == 0) continue;
    FrameIn f;
    f.address = l.address;
    // Only ever below another frame: a return address (looked up in its call, one byte back).
    f.return_address = l.caller && !l.leaf;
    frames.push_back(f);
    which.push_back(i);
  }
  out.kernel_locations = frames.size();
  std::map<uint64_t, std::vector<ingest::PprofFrame>> lines;
  size_t unslid = 0;
  for (size_t start = 0; start < frames.size(); start += kMaxAddressesPerRequest) {
    const size_t n = std::min(kMaxAddressesPerRequest, frames.size() - start);
    std::vector<FrameIn> batch(frames.begin() + static_cast<ptrdiff_t>(start),
                               frames.begin() + static_cast<ptrdiff_t>(start + n));
    ASSIGN_OR_RETURN(FramesResult r, api.Ask<SymbolizeFrames>({req.target, ctx, std::move(batch)}));
    out.target = r.target;
    for (size_t k = 0; k < n; ++k) {
      const FrameAnswer& a = r.frames[k];
      if (!a.info->symbol) continue;
      const Instance& sym = *a.info->symbol;
      // A vmlinux address with no slide given, on a target that is not the running host: taken as
      // link-time (Frames says so in the answer's note too).
      if (!ctx.text && !ctx.kaslr_offset && r.target.kind != "live" && sym.module.empty()) ++unslid;
      std::vector<ingest::PprofFrame>& fr = lines[p.locations[which[start + k]].id];
      const auto& chain = a.info->frames;
      // The function itself: a duplicated name by its canonical spec, so copies stay apart.
      ingest::PprofFrame outer;
      outer.name = a.canonical.empty() ? sym.name : a.canonical;
      outer.system_name = sym.name;
      if (sym.dwarf) outer.start_line = sym.dwarf->decl_line;
      if (chain.empty()) {
        outer.filename = sym.dwarf ? sym.dwarf->decl_file : std::string();
        fr.push_back(outer);
        continue;
      }
      for (size_t c = 0; c + 1 < chain.size(); ++c) {
        fr.push_back({chain[c].function, chain[c].function, chain[c].file, 0, chain[c].line, chain[c].column});
      }
      outer.filename = chain.back().file;
      outer.line = chain.back().line;
      outer.column = chain.back().column;
      fr.push_back(outer);
    }
  }
  out.symbolized = lines.size();
  if (kernel.empty()) out.notes.push_back("the profile has no kernel or module mapping: nothing to symbolize");
  if (unslid) {
    out.notes.push_back(StrCat(unslid,
                               " kernel locations taken as link-time addresses: give the host's _text "
                               "(--kernel-text) or KASLR offset for a host booted with KASLR"));
  }
  if (out.symbolized < out.kernel_locations) {
    out.notes.push_back(StrCat(out.kernel_locations - out.symbolized, " of ", out.kernel_locations,
                               " kernel locations are in no symbol of target ", out.target.name));
  }
  ASSIGN_OR_RETURN(out.profile, ingest::GzipCompress(ingest::RewritePprof(bytes, p, lines, symbolized_mappings)));
  return out;
}

absl::Status SymbolizeProfile::Check(const PprofRequest& r) {
  return CheckFramesRequest({r.kernel_build_id, r.host_text, r.kaslr_offset, {}}, 0);
}

absl::StatusOr<PprofResult> SymbolizeProfile::Composed(QueryApi& api, const PprofRequest& r) {
  return SymbolizePprof(api, r);
}

}  // namespace symdex::query
