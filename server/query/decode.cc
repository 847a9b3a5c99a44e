#include "server/query/decode.h"

#include <algorithm>
#include <iterator>
#include <set>

#include "server/common/strings.h"
#include "server/ingest/kernel_log.h"
#include "server/query/api.h"
#include "server/query/local_query.h"

namespace symdex::query {
namespace {

// The target a log is decoded against, and how it was chosen.
absl::StatusOr<std::pair<std::string, std::string>> PickTarget(QueryApi& api, const DecodeRequest& req,
                                                               const ingest::KernelLog& log) {
  if (!req.target.empty()) return std::make_pair(req.target, std::string("named"));
  if (!req.kernel_build_id.empty()) {
    return std::make_pair(StrCat(kBuildIdTargetPrefix, Lower(req.kernel_build_id)), std::string("by build-ID"));
  }
  if (log.release.empty()) return std::make_pair(std::string(), std::string("the default target"));
  ASSIGN_OR_RETURN(TargetsAnswer all, api.Ask<Targets>({}));
  std::vector<std::string> same;
  for (const TargetSummary& t : all.targets) {
    if (t.info.release == log.release) same.push_back(t.info.name);
  }
  if (same.size() == 1) return std::make_pair(same.front(), StrCat("release ", log.release, " in the log"));
  if (same.empty()) {
    return std::make_pair(std::string(),
                          StrCat("the default target (no target is release ", log.release, ", which the log names)"));
  }
  return absl::InvalidArgumentError(StrCat("the log names release ", log.release, "; targets ", StrJoin(same, ", "),
                                           " are that release: pick one with --target or --build-id"));
}

std::vector<FrameModule> ModulesOf(const ingest::KernelLog& log) {
  std::vector<FrameModule> out;
  std::set<std::string> seen;
  for (const ingest::LogFrame& f : log.frames) {
    if (f.frame.module.empty() || f.frame.module_build_id.empty() || !seen.insert(f.frame.module).second) continue;
    if (out.size() >= kMaxFrameModules) break;
    out.push_back(FrameModule{f.frame.module, f.frame.module_build_id, {}, std::nullopt});
  }
  return out;
}

// SymbolizeFrames over `in`, in requests of at most kMaxAddressesPerRequest frames, each cut where no
// frame's caller lies past it (a stack's frames narrow each other: they go in one request), its
// callers renumbered. One answer comes from one generation of the target.
absl::StatusOr<FramesResult> FramesInParts(QueryApi& api, const std::string& target, const FramesContext& ctx,
                                           const std::vector<FrameIn>& in) {
  if (in.size() <= kMaxAddressesPerRequest) return api.Ask<SymbolizeFrames>({target, ctx, in});
  const std::vector<size_t> cuts = StackCuts(in);
  FramesResult out;
  for (size_t begin = 0; begin < in.size();) {
    size_t end = std::min(in.size(), begin + kMaxAddressesPerRequest);
    if (end < in.size()) {
      // the last cut at or before `end`, past `begin`
      auto at = std::upper_bound(cuts.begin(), cuts.end(), end);
      if (at == cuts.begin() || *std::prev(at) <= begin) {
        return absl::InvalidArgumentError(
            StrCat("a stack of more than ", kMaxAddressesPerRequest, " frames: split the log"));
      }
      end = *std::prev(at);
    }
    std::vector<FrameIn> part(in.begin() + static_cast<std::ptrdiff_t>(begin),
                              in.begin() + static_cast<std::ptrdiff_t>(end));
    for (FrameIn& f : part) {
      if (f.caller) *f.caller -= static_cast<uint32_t>(begin);
    }
    ASSIGN_OR_RETURN(FramesResult r, api.Ask<SymbolizeFrames>({target, ctx, std::move(part)}));
    if (begin == 0) {
      out = std::move(r);
    } else if (r.target.name != out.target.name || r.target.generation != out.target.generation) {
      return absl::AbortedError(StrCat("target ", out.target.name, " was re-indexed while the log was decoded"));
    } else {
      std::move(r.frames.begin(), r.frames.end(), std::back_inserter(out.frames));
    }
    begin = end;
  }
  return out;
}

}  // namespace

absl::StatusOr<std::vector<FrameModule>> DecodeModules(std::string_view text) {
  ASSIGN_OR_RETURN(ingest::KernelLog log, ingest::ScanKernelLog(text));
  return ModulesOf(log);
}

absl::StatusOr<DecodeResult> Decode(QueryApi& api, const DecodeRequest& req) {
  ASSIGN_OR_RETURN(ingest::KernelLog log, ingest::ScanKernelLog(req.text));
  DecodeResult out;
  out.lines = log.lines.size();
  out.release = log.release;
  FramesContext ctx;
  ctx.kernel_build_id = req.kernel_build_id;
  ctx.text = req.host_text;
  ctx.kaslr_offset = req.kaslr_offset;
  ctx.modules = ModulesOf(log);
  RETURN_IF_ERROR(CheckFramesRequest(ctx, 0));
  ASSIGN_OR_RETURN(auto picked, PickTarget(api, req, log));
  out.target_reason = picked.second;
  if (log.frames.empty()) return out;
  std::vector<FrameIn> in(log.frames.size());
  for (size_t i = 0; i < log.frames.size(); ++i) {
    const ingest::LogFrame& f = log.frames[i];
    in[i].text = f.normalized;
    in[i].return_address = f.return_address;
    if (f.caller) in[i].caller = static_cast<uint32_t>(*f.caller);
  }
  ASSIGN_OR_RETURN(FramesResult r, FramesInParts(api, picked.first, ctx, in));
  if (ctx.text || ctx.kaslr_offset) {
    out.slide = ctx.kaslr_offset;
    if (ctx.text && r.target.AnchorAddr()) out.slide = static_cast<int64_t>(*ctx.text - *r.target.AnchorAddr());
    out.slide_reason = "given";
  } else {
    // The slide, from frames that print an address and a vmlinux symbol+offset known by name alone.
    std::optional<int64_t> slide;
    size_t agree = 0, printed = 0;
    bool conflict = false;
    for (size_t i = 0; i < log.frames.size(); ++i) {
      const ingest::LogFrame& f = log.frames[i];
      if (!f.frame.address) continue;
      ++printed;
      const FrameAnswer& a = r.frames[i];
      if (a.basis != FrameBasis::kSymbolOffset || !a.exact || !a.target_address || !f.frame.module.empty()) continue;
      const int64_t s = static_cast<int64_t>(*f.frame.address - *a.target_address);
      if (slide && *slide != s) conflict = true;
      slide = s;
      ++agree;
    }
    if (printed == 0) {
      out.slide_reason = "the log prints no kernel addresses";
    } else if (r.target.kind == "live") {
      out.slide_reason = "the target is live: the log's addresses are taken as its own (a log of this boot)";
    } else if (conflict) {
      out.slide_reason = "the log's addresses disagree about the KASLR slide (several boots?): addresses not used";
    } else if (!slide) {
      out.slide_reason = "no frame prints both an address and a unique vmlinux symbol: addresses taken as link-time";
    } else {
      out.slide = slide;
      out.slide_reason = StrCat("learnt from ", agree, " frame", agree == 1 ? "" : "s");
      if (r.target.AnchorAddr()) {
        ctx.text = *r.target.AnchorAddr() + static_cast<uint64_t>(*slide);
      } else {
        ctx.kaslr_offset = slide;
      }
      ASSIGN_OR_RETURN(r, FramesInParts(api, picked.first, ctx, in));
    }
  }
  // A register dump's frame (RIP:, pc :, the WARNING line) names the faulting instruction, which
  // the report prints again — arm64 as the first frame of its Call trace, which the call before
  // the next return address can pin. Left ambiguous, it is that place when a later frame of its
  // stack (or of the stack right after it: a WARNING line's report) prints the same words and was
  // pinned.
  auto pinned = [&](const FrameAnswer& a) {
    return a.candidates.empty() && a.info && a.info->symbol && a.error.empty();
  };
  for (size_t i = 0; i < log.frames.size(); ++i) {
    if (!log.frames[i].regs || r.frames[i].candidates.empty()) continue;
    for (size_t j = i + 1; j < log.frames.size() && log.frames[j].trace <= log.frames[i].trace + 1; ++j) {
      if (log.frames[j].normalized != log.frames[i].normalized || !pinned(r.frames[j])) continue;
      FrameAnswer same = r.frames[j];
      same.note = StrCat("the faulting instruction, as line ", log.frames[j].line + 1, " prints it",
                         same.note.empty() ? "" : ": ", same.note);
      r.frames[i] = std::move(same);
      break;
    }
  }
  out.target = r.target;
  out.frames.resize(log.frames.size());
  for (size_t i = 0; i < log.frames.size(); ++i) {
    const ingest::LogFrame& f = log.frames[i];
    DecodedFrame& d = out.frames[i];
    d.line = f.line;
    d.begin = f.begin;
    d.end = f.end;
    d.regs = f.regs;
    d.unreliable = f.frame.unreliable;
    d.answer = std::move(r.frames[i]);
    if (!d.answer.candidates.empty()) {
      ++out.ambiguous;
    } else if (d.answer.info->symbol && d.answer.error.empty()) {
      ++out.pinned;
    } else {
      ++out.unanswered;
    }
  }
  return out;
}

VerbRoute RouteByBuildId(const std::string& target, const std::string& kernel_build_id) {
  if (!target.empty() || kernel_build_id.empty()) return {target};
  return {StrCat(kBuildIdTargetPrefix, Lower(kernel_build_id))};
}

absl::Status DecodeLog::Check(const DecodeRequest& r) {
  return CheckFramesRequest({r.kernel_build_id, r.host_text, r.kaslr_offset, {}}, 0);
}

absl::StatusOr<DecodeResult> DecodeLog::Composed(QueryApi& api, const DecodeRequest& r) { return Decode(api, r); }

// Modules the log names with build-IDs: a fleet replica fetches them by those.
VerbRoute DecodeLog::RouteOf(const DecodeRequest& r) {
  VerbRoute route = RouteByBuildId(r.target, r.kernel_build_id);
  route.modules = DecodeModules(r.text);
  return route;
}

}  // namespace symdex::query
