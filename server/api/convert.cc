#include "server/api/convert.h"

#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>

#include "server/api/wire_fields.h"

#include <type_traits>

#include "google/rpc/status.pb.h"
#include "server/common/strings.h"

namespace symdex::api {

void ToProto(const query::Instance& in, pb::Instance* out) {
  out->set_name(in.name);
  out->set_module(in.module);
  out->set_type(std::string(1, in.type));
  if (in.addr) out->set_address(*in.addr);
  out->set_section(in.section);
  out->set_section_offset(in.section_offset);
  if (in.size) out->set_size(*in.size);
  out->set_size_exact(in.size_exact);
  if (in.text_offset) out->set_text_offset(*in.text_offset);
  if (in.text_anchor != "_text") out->set_text_anchor(in.text_anchor);
  out->set_same_name_total(in.same_name_total);
  out->set_same_name_in_module(in.same_name_in_module);
  out->set_probe(in.probe);
  out->set_init_or_exit(in.init_or_exit);
  if (in.dwarf) {
    pb::Dwarf* d = out->mutable_dwarf();
    d->set_has_function(in.dwarf->has_function);
    d->set_function(in.dwarf->function);
    d->set_cu(in.dwarf->cu);
    d->set_decl_file(in.dwarf->decl_file);
    d->set_decl_line(in.dwarf->decl_line);
    d->set_entry_file(in.dwarf->entry_file);
    d->set_entry_line(in.dwarf->entry_line);
    d->set_inline_copy(in.dwarf->inline_copy);
  }
  out->set_dwarf_note(in.dwarf_note);
  out->set_verdict(std::string(query::ProbeabilityName(in.verdict.kind)));
  out->set_kprobe_ok(in.verdict.kprobe);
  out->set_ftrace_ok(in.verdict.ftrace);
  out->set_verdict_reason(in.verdict.reason);
  out->set_probe_bits(in.verdict.bits);
  if (in.fentry.kind != query::FentryReach::kUnknown || !in.fentry.reason.empty()) {
    out->set_fentry(std::string(query::FentryReachName(in.fentry.kind)));
    out->set_fentry_reason(in.fentry.reason);
  }
}

namespace {

// A string field of message `m`, moved out of it when `m` is not const (an answer being
// converted once: the thousands of names and paths of a frames answer), else copied. An empty
// field is not touched (mutable_*() would allocate it).
template <typename M, typename Get, typename Mut>
std::string TakeString(M& m, Get get, Mut mut) {
  const std::string& v = (m.*get)();
  if constexpr (std::is_const_v<M>) {
    return v;
  } else {
    return v.empty() ? std::string() : std::move(*(m.*mut)());
  }
}
#define SYMDEX_TAKE(m, field) \
  TakeString(m, &std::remove_cvref_t<decltype(m)>::field, &std::remove_cvref_t<decltype(m)>::mutable_##field)

// The repeated `frames` field of `m` (an AddressResult's or a SymbolizeFramesResponse's),
// mutable when `m` is.
template <typename M>
auto& FramesOf(M& m) {
  if constexpr (std::is_const_v<M>) {
    return m.frames();
  } else {
    return *m.mutable_frames();
  }
}

// A message field of `m`, mutable when `m` is.
template <typename M, typename Get, typename Mut>
auto* FieldOf(M& m, Get get, Mut mut) {
  if constexpr (std::is_const_v<M>) {
    return &(m.*get)();
  } else {
    return (m.*mut)();
  }
}

template <typename M>
query::Instance ToInstance(M& in) {
  query::Instance out;
  out.name = SYMDEX_TAKE(in, name);
  out.module = SYMDEX_TAKE(in, module);
  out.type = in.type().empty() ? '?' : in.type()[0];
  if (in.has_address()) out.addr = in.address();
  out.section = SYMDEX_TAKE(in, section);
  out.section_offset = in.section_offset();
  if (in.has_size()) out.size = in.size();
  out.size_exact = in.size_exact();
  if (in.has_text_offset()) out.text_offset = in.text_offset();
  if (!in.text_anchor().empty()) out.text_anchor = in.text_anchor();
  out.same_name_total = in.same_name_total();
  out.same_name_in_module = in.same_name_in_module();
  out.probe = SYMDEX_TAKE(in, probe);
  out.init_or_exit = in.init_or_exit();
  if (in.has_dwarf()) {
    auto& d = *FieldOf(in, &pb::Instance::dwarf, &pb::Instance::mutable_dwarf);
    DwarfInfo w;
    w.has_function = d.has_function();
    w.function = SYMDEX_TAKE(d, function);
    w.cu = SYMDEX_TAKE(d, cu);
    w.decl_file = SYMDEX_TAKE(d, decl_file);
    w.decl_line = d.decl_line();
    w.entry_file = SYMDEX_TAKE(d, entry_file);
    w.entry_line = d.entry_line();
    w.inline_copy = d.inline_copy();
    out.dwarf = std::move(w);
  }
  out.dwarf_note = SYMDEX_TAKE(in, dwarf_note);
  out.verdict.kind = query::ParseProbeability(in.verdict()).value_or(query::Probeability::kUnknown);
  out.verdict.kprobe = in.kprobe_ok();
  out.verdict.ftrace = in.ftrace_ok();
  out.verdict.reason = SYMDEX_TAKE(in, verdict_reason);
  out.verdict.bits = in.probe_bits();
  out.fentry.kind = query::ParseFentryReach(in.fentry()).value_or(query::FentryReach::kUnknown);
  out.fentry.reason = SYMDEX_TAKE(in, fentry_reason);
  return out;
}

}  // namespace

query::Instance FromProto(const pb::Instance& in) { return ToInstance(in); }
query::Instance FromProto(pb::Instance&& in) { return ToInstance(in); }

void ToProto(const query::TargetSummary& t, pb::Target* out) {
  const TargetInfo& i = t.info;
  out->set_name(i.name);
  out->set_kind(i.kind);
  out->set_release(i.release);
  out->set_build_id(i.build_id);
  out->set_source(i.source);
  out->set_warnings(i.warnings);
  if (i.text_addr) out->set_text_address(*i.text_addr);
  if (i.text_anchor != "_text") out->set_text_anchor(i.text_anchor);
  if (i.anchor_addr) out->set_anchor_address(*i.anchor_addr);
  out->set_machine(i.machine);
  out->set_indexed_at(i.indexed_at);
  out->set_generation(i.generation);
  if (i.kprobe_events_on_notrace) out->set_kprobe_events_on_notrace(*i.kprobe_events_on_notrace);
  out->set_kernel_config(i.kernel_config);
  if (i.fprobe) out->set_fprobe(*i.fprobe);
  if (i.ftrace_direct) out->set_ftrace_direct(*i.ftrace_direct);
  out->set_modules(t.counts.modules);
  out->set_vmlinux_symbols(t.counts.vmlinux_symbols);
  out->set_module_symbols(t.counts.module_symbols);
  out->set_text_symbols(t.counts.text_symbols);
}

query::TargetSummary FromProto(const pb::Target& t) {
  query::TargetSummary out;
  TargetInfo& i = out.info;
  i.name = t.name();
  i.kind = t.kind();
  i.release = t.release();
  i.build_id = t.build_id();
  i.source = t.source();
  i.warnings = t.warnings();
  if (t.has_text_address()) i.text_addr = t.text_address();
  if (!t.text_anchor().empty()) i.text_anchor = t.text_anchor();
  if (t.has_anchor_address()) i.anchor_addr = t.anchor_address();
  i.machine = static_cast<uint16_t>(t.machine());
  i.indexed_at = t.indexed_at();
  i.generation = t.generation();
  if (t.has_kprobe_events_on_notrace()) i.kprobe_events_on_notrace = t.kprobe_events_on_notrace();
  i.kernel_config = t.kernel_config();
  if (t.has_fprobe()) i.fprobe = t.fprobe();
  if (t.has_ftrace_direct()) i.ftrace_direct = t.ftrace_direct();
  out.counts.modules = t.modules();
  out.counts.vmlinux_symbols = t.vmlinux_symbols();
  out.counts.module_symbols = t.module_symbols();
  out.counts.text_symbols = t.text_symbols();
  return out;
}

void ToProto(const query::CanonicalMatch& m, pb::Match* out) {
  ToProto(m.match.instance, out->mutable_instance());
  out->set_offset(m.match.offset);
  out->set_canonical(m.canonical);
}

query::CanonicalMatch FromProto(const pb::Match& m) { return {{FromProto(m.instance()), m.offset()}, m.canonical()}; }

void ToProto(uint64_t addr, const query::AddressInfo& a, pb::AddressResult* out) {
  out->set_address(addr);
  if (a.symbol) {
    // The symbol in brief (what a stack frame needs; Which has the rest): Symbolize answers are
    // streamed by the thousand.
    const query::Instance& in = *a.symbol;
    pb::Instance* s = out->mutable_symbol();
    // Empty strings are not set: proto3 does not send them, and setting one on an arena message
    // still allocates it (thousands per answer).
    s->set_name(in.name);
    if (!in.module.empty()) s->set_module(in.module);
    s->set_type(&in.type, 1);
    if (in.addr) s->set_address(*in.addr);
    if (!in.section.empty()) s->set_section(in.section);  // an offline module's symbol: no address, a section offset
    s->set_section_offset(in.section_offset);
    if (in.size) s->set_size(*in.size);
    s->set_size_exact(in.size_exact);
    if (in.text_offset) s->set_text_offset(*in.text_offset);
  }
  out->set_offset(a.offset);
  for (const auto& f : a.frames) {
    pb::Frame* p = out->add_frames();
    p->set_function(f.function);
    if (!f.file.empty()) p->set_file(f.file);
    p->set_line(f.line);
    p->set_column(f.column);
  }
  if (!a.note.empty()) out->set_note(a.note);
}

namespace {
template <typename M>
query::AddressInfo ToAddressInfo(M& a) {
  query::AddressInfo out;
  if (a.has_symbol())
    out.symbol = ToInstance(*FieldOf(a, &pb::AddressResult::symbol, &pb::AddressResult::mutable_symbol));
  out.offset = a.offset();
  out.frames.reserve(a.frames_size());
  for (auto& f : FramesOf(a)) {
    out.frames.push_back({SYMDEX_TAKE(f, function), SYMDEX_TAKE(f, file), f.line(), f.column()});
  }
  out.note = SYMDEX_TAKE(a, note);
  return out;
}
}  // namespace

query::AddressInfo FromProto(const pb::AddressResult& a) { return ToAddressInfo(a); }
query::AddressInfo FromProto(pb::AddressResult&& a) { return ToAddressInfo(a); }

void ToProto(const query::SymbolizeRequest& r, pb::SymbolizeRequest* out) {
  out->set_target(r.target);
  out->mutable_addresses()->Add(r.addresses.begin(), r.addresses.end());
}

query::SymbolizeRequest FromProto(const pb::SymbolizeRequest& r) {
  return {r.target(), {r.addresses().begin(), r.addresses().end()}};
}

void ToProto(const query::SymbolizeResult& r, pb::SymbolizeResponse* out) {
  out->set_target(r.target.name);
  ToProto(query::TargetSummary{r.target, {}}, out->mutable_target_info());
  out->mutable_results()->Reserve(static_cast<int>(r.results.size()));
  for (size_t i = 0; i < r.results.size(); ++i) ToProto(r.addresses[i], *r.results[i], out->add_results());
}

namespace {
template <typename M>
query::SymbolizeResult ToSymbolizeResult(M& resp) {
  query::SymbolizeResult out;
  out.target = FromProto(resp.target_info()).info;
  out.addresses.reserve(resp.results_size());
  out.results.reserve(resp.results_size());
  auto each = [&](auto& r) {
    out.addresses.push_back(r.address());
    out.results.push_back(std::make_shared<const query::AddressInfo>(ToAddressInfo(r)));
  };
  if constexpr (std::is_const_v<M>) {
    for (const auto& r : resp.results()) each(r);
  } else {
    for (auto& r : *resp.mutable_results()) each(r);
  }
  return out;
}
}  // namespace

query::SymbolizeResult FromProto(const pb::SymbolizeResponse& r) { return ToSymbolizeResult(r); }
query::SymbolizeResult FromProto(pb::SymbolizeResponse&& r) { return ToSymbolizeResult(r); }

grpc::Status ToGrpc(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

absl::Status FromGrpc(const grpc::Status& s) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
}

grpc::Status ResolveError(const std::string& spec, const query::ResolveResult& r) {
  pb::Ambiguity amb;
  amb.set_spec(spec);
  ToProto(query::TargetSummary{r.target, {}}, amb.mutable_target());
  size_t left_out = 0;
  for (const auto& m : r.matches) {
    if (amb.ByteSizeLong() > kMaxStatusDetailsBytes - 4096) {
      ++left_out;
      continue;
    }
    ToProto(m, amb.add_candidates());
  }
  google::rpc::Status details;
  std::string msg;
  grpc::StatusCode code;
  if (r.matches.empty()) {
    code = grpc::StatusCode::NOT_FOUND;
    msg = StrCat(spec, ": no function instance matches in target '", r.target.name, "'");
  } else {
    code = grpc::StatusCode::ABORTED;
    msg = StrCat(spec, " is ambiguous: ", r.matches.size(), " candidates; name one with its canonical spec");
    if (left_out) msg += StrCat(" (", left_out, " left out of the details: ask Which for all of them)");
  }
  details.set_code(static_cast<int>(code));
  details.set_message(msg);
  details.add_details()->PackFrom(amb);
  return grpc::Status(code, msg, details.SerializeAsString());
}

absl::StatusOr<query::ResolveResult> ResolveFromError(const grpc::Status& s) {
  if (s.error_code() == grpc::StatusCode::NOT_FOUND || s.error_code() == grpc::StatusCode::ABORTED) {
    google::rpc::Status details;
    pb::Ambiguity amb;
    if (!s.error_details().empty() && details.ParseFromString(s.error_details()) && details.details_size() > 0 &&
        details.details(0).UnpackTo(&amb)) {
      query::ResolveResult r;
      r.target = FromProto(amb.target()).info;
      for (const auto& m : amb.candidates()) r.matches.push_back(FromProto(m));
      return r;
    }
  }
  return FromGrpc(s);
}

void ToProto(const query::AddrMapState& a, pb::AddrMap* out) {
  out->set_status(std::string(query::AddrMapStatusName(a.status)));
  out->set_path(a.path);
  out->set_detail(a.detail);
}

query::AddrMapState FromProto(const pb::AddrMap& a) {
  query::AddrMapState out{.path = a.path(), .detail = a.detail()};
  if (auto status = query::ParseAddrMapStatus(a.status()); status.ok()) {
    out.status = *status;
  } else {  // a newer daemon's word for it
    out.status = query::AddrMapStatus::kInvalid;
    out.detail = std::string(status.status().message());
  }
  return out;
}

void ToProto(const query::JitFunction& l, pb::JitLoad* out) {
  out->set_pid(l.pid);
  out->set_code_index(l.code_index);
  out->set_name(l.name);
  out->set_code_address(l.code_addr);
  out->set_code_size(l.code_size);
  out->set_address(l.addr);
  out->set_dso(l.DsoName());
  for (const auto& [scheme, hex] : l.build_ids) (*out->mutable_build_ids())[scheme] = hex;
  if (l.line) {
    out->set_has_source(true);
    out->set_source_file(l.line->file);
    out->set_source_line(l.line->line);
    out->set_source_column(l.line->column);
    out->set_source_address(l.line->addr);
  }
  out->set_dump_timestamp(l.instance.dump_timestamp);
  out->set_dump_path(l.instance.path);
  ToWire(l.instance, out->mutable_instance());  // by its field list (query/jit_types.h)
  out->set_load_id(l.load_id);
  out->set_load_time(l.load_time);
  out->set_file_offset(l.file_offset);
  out->set_placed_time(l.placed_time);
  if (l.until) out->set_until(*l.until);
  out->set_placed_by(l.placed_by);
  out->set_line_entries(l.line_entries);
}

query::JitFunction FromProto(const pb::JitLoad& l) {
  query::JitFunction out;
  out.load_id = l.load_id();
  FromWire(l.instance(), &out.instance);
  out.pid = l.pid();
  out.code_index = l.code_index();
  out.name = l.name();
  out.code_addr = l.code_address();
  out.code_size = l.code_size();
  out.load_time = l.load_time();
  out.file_offset = l.file_offset();
  out.addr = l.address();
  out.placed_time = l.placed_time();
  if (l.has_until()) out.until = l.until();
  out.placed_by = l.placed_by();
  out.build_ids.insert(l.build_ids().begin(), l.build_ids().end());
  if (l.has_source())
    out.line = query::JitSourceLine{l.source_file(), l.source_line(), l.source_column(), l.source_address()};
  out.line_entries = l.line_entries();
  return out;
}

void ToProto(const query::JitAddrResult& r, pb::JitAddrResult* out) {
  out->set_address(r.address);
  if (r.function) {
    ToProto(*r.function, out->mutable_load());
  } else if (r.perf_map) {
    out->set_perf_map_symbol(r.perf_map->name);
    ToWire(*r.perf_map, out->mutable_perf_map());
  }
}

query::JitAddrResult FromProto(const pb::JitAddrResult& r) {
  query::JitAddrResult out;
  out.address = r.address();
  if (r.has_load()) out.function = FromProto(r.load());
  if (r.has_perf_map()) FromWire(r.perf_map(), &out.perf_map.emplace());
  return out;
}

void ToProto(const query::BuildIdAnswer& a, pb::LookupBuildIdResponse* out) {
  out->set_build_id(a.build_id);
  for (const auto& h : a.kernel) {
    pb::BuildIdHit* o = out->add_hits();
    o->set_kind(h.kind);
    o->set_name(h.name);
    o->set_target(h.target);
  }
  for (const auto& m : a.jitted) {
    pb::BuildIdHit* o = out->add_hits();
    o->set_kind("jitted");
    o->set_name(m.load.DsoName());
    o->set_scheme(m.scheme);
    ToProto(m.load, o->mutable_load());
  }
}

query::BuildIdAnswer FromProto(const pb::LookupBuildIdResponse& a) {
  query::BuildIdAnswer out;
  out.build_id = a.build_id();
  for (const auto& h : a.hits()) {
    if (h.kind() == "jitted") {
      out.jitted.push_back({h.scheme(), FromProto(h.load())});
    } else {
      out.kernel.push_back({h.kind(), h.name(), h.target()});
    }
  }
  return out;
}

void ToProto(const std::string& target, const query::FramesContext& ctx, std::span<const query::FrameIn> frames,
             pb::SymbolizeFramesRequest* out, uint32_t first) {
  out->set_target(target);
  out->set_kernel_build_id(ctx.kernel_build_id);
  if (ctx.text) out->set_text(*ctx.text);
  if (ctx.kaslr_offset) out->set_kaslr_offset(*ctx.kaslr_offset);
  for (const query::FrameModule& m : ctx.modules) {
    pb::FrameModule* p = out->add_modules();
    p->set_name(m.name);
    p->set_build_id(m.build_id);
    for (const auto& [name, base] : m.sections) {
      pb::ModuleSection* sec = p->add_sections();
      sec->set_name(name);
      sec->set_base(base);
    }
    if (m.size) p->set_size(*m.size);
  }
  for (const query::FrameIn& f : frames) {
    pb::FrameInput* p = out->add_frames();
    if (f.address) {
      p->set_address(*f.address);
    } else if (f.offset) {
      p->mutable_module_offset()->set_module(f.module);
      p->mutable_module_offset()->set_section(f.section);
      p->mutable_module_offset()->set_offset(*f.offset);
    } else {
      p->set_text(f.text);
    }
    p->set_return_address(f.return_address);
    if (f.caller) p->set_caller(*f.caller - first);
  }
}

void FromProto(const pb::SymbolizeFramesRequest& req, std::string* target, query::FramesContext* ctx,
               std::vector<query::FrameIn>* frames) {
  *target = req.target();
  ctx->kernel_build_id = req.kernel_build_id();
  if (req.kernel_base_case() == pb::SymbolizeFramesRequest::kText) ctx->text = req.text();
  if (req.kernel_base_case() == pb::SymbolizeFramesRequest::kKaslrOffset) ctx->kaslr_offset = req.kaslr_offset();
  ctx->modules.reserve(req.modules_size());
  for (const pb::FrameModule& p : req.modules()) {
    query::FrameModule m;
    m.name = p.name();
    m.build_id = p.build_id();
    for (const pb::ModuleSection& sec : p.sections()) m.sections.emplace_back(sec.name(), sec.base());
    if (p.has_size()) m.size = p.size();
    ctx->modules.push_back(std::move(m));
  }
  if (frames == nullptr) return;
  frames->reserve(req.frames_size());
  for (const pb::FrameInput& p : req.frames()) {
    query::FrameIn f;
    switch (p.frame_case()) {
      case pb::FrameInput::kAddress:
        f.address = p.address();
        break;
      case pb::FrameInput::kModuleOffset:
        f.module = p.module_offset().module();
        f.section = p.module_offset().section();
        f.offset = p.module_offset().offset();
        break;
      case pb::FrameInput::kText:
        f.text = p.text();
        break;
      case pb::FrameInput::FRAME_NOT_SET:
        break;  // answered as "a frame is exactly one of ..."
    }
    f.return_address = p.return_address();
    if (p.has_caller()) f.caller = p.caller();
    frames->push_back(std::move(f));
  }
}

void ToProto(const query::FramesRequest& r, pb::SymbolizeFramesRequest* out) {
  ToProto(r.target, r.ctx, r.frames, out);
}

query::FramesRequest FromProto(const pb::SymbolizeFramesRequest& req) {
  query::FramesRequest out;
  FromProto(req, &out.target, &out.ctx, &out.frames);
  return out;
}

void ToProto(const query::FramesResult& r, pb::SymbolizeFramesResponse* out) {
  ToProto(query::TargetSummary{r.target, {}}, out->mutable_target_info());
  out->mutable_frames()->Reserve(static_cast<int>(r.frames.size()));
  for (const query::FrameAnswer& a : r.frames) ToProto(a, out->add_frames());
}

void ToProto(const query::FrameAnswer& a, pb::FrameResult* p) {
  {
    if (a.basis != query::FrameBasis::kNone) p->set_basis(std::string(query::FrameBasisName(a.basis)));
    p->set_exact(a.exact);
    ToProto(a.target_address.value_or(0), *a.info, p->mutable_result());
    if (!a.canonical.empty()) p->set_canonical(a.canonical);
    if (a.target_address) p->set_target_address(*a.target_address);
    if (!a.module.empty()) p->set_module(a.module);
    if (!a.section.empty()) p->set_section(a.section);
    p->set_section_offset(a.section_offset);
    for (const std::string& c : a.candidates) p->add_candidates(c);
    if (!a.error.empty()) p->set_error(a.error);
    if (!a.note.empty()) p->set_note(a.note);
  }
}

namespace {
template <typename M>
query::FrameAnswer ToFrameAnswer(M& p) {
  query::FrameAnswer a;
  if (p.basis() == "address") a.basis = query::FrameBasis::kAddress;
  if (p.basis() == "module-offset") a.basis = query::FrameBasis::kModuleOffset;
  if (p.basis() == "symbol+offset") a.basis = query::FrameBasis::kSymbolOffset;
  a.exact = p.exact();
  a.info = std::make_shared<const query::AddressInfo>(
      ToAddressInfo(*FieldOf(p, &pb::FrameResult::result, &pb::FrameResult::mutable_result)));
  a.canonical = SYMDEX_TAKE(p, canonical);
  if (p.has_target_address()) a.target_address = p.target_address();
  a.module = SYMDEX_TAKE(p, module);
  a.section = SYMDEX_TAKE(p, section);
  a.section_offset = p.section_offset();
  a.candidates.assign(p.candidates().begin(), p.candidates().end());
  a.error = SYMDEX_TAKE(p, error);
  a.note = SYMDEX_TAKE(p, note);
  return a;
}

template <typename M>
query::FramesResult ToFramesResult(M& r) {
  query::FramesResult out;
  out.target = FromProto(r.target_info()).info;
  out.frames.reserve(r.frames_size());
  for (auto& p : FramesOf(r)) {
    out.frames.push_back(ToFrameAnswer(p));
  }
  return out;
}
}  // namespace

query::FramesResult FromProto(const pb::SymbolizeFramesResponse& r) { return ToFramesResult(r); }
query::FramesResult FromProto(pb::SymbolizeFramesResponse&& r) { return ToFramesResult(r); }
query::FrameAnswer FromProto(const pb::FrameResult& p) { return ToFrameAnswer(p); }

namespace {
// The kernel a decode or pprof request names and its base: the same fields in both messages.
template <class Out, class M>
Out WithKernelBase(const M& req) {
  Out out;
  out.target = req.target();
  out.kernel_build_id = req.kernel_build_id();
  if (req.kernel_base_case() == M::kText) out.host_text = req.text();
  if (req.kernel_base_case() == M::kKaslrOffset) out.kaslr_offset = req.kaslr_offset();
  return out;
}
}  // namespace

query::DecodeRequest FromProto(const pb::DecodeRequest& req) {
  auto out = WithKernelBase<query::DecodeRequest>(req);
  out.text = req.log();
  return out;
}

query::PprofRequest FromProto(const pb::SymbolizePprofRequest& req) {
  auto out = WithKernelBase<query::PprofRequest>(req);
  out.profile = req.profile();
  return out;
}

void ToProto(const query::PprofResult& r, pb::SymbolizePprofResponse* out) {
  out->set_profile(r.profile);
  ToProto(query::TargetSummary{r.target, {}}, out->mutable_target_info());
  out->set_samples(r.samples);
  out->set_locations(r.locations);
  out->set_kernel_locations(r.kernel_locations);
  out->set_symbolized(r.symbolized);
  for (const std::string& n : r.notes) out->add_notes(n);
}

void ToProto(const query::DecodeResult& r, pb::DecodeResponse* out) {
  ToProto(query::TargetSummary{r.target, {}}, out->mutable_target_info());
  out->set_target_reason(r.target_reason);
  out->set_release(r.release);
  if (r.slide) out->set_slide(*r.slide);
  out->set_slide_reason(r.slide_reason);
  out->mutable_frames()->Reserve(static_cast<int>(r.frames.size()));
  for (const query::DecodedFrame& d : r.frames) {
    pb::DecodedFrame* p = out->add_frames();
    p->set_line(static_cast<uint32_t>(d.line));
    p->set_begin(static_cast<uint32_t>(d.begin));
    p->set_end(static_cast<uint32_t>(d.end));
    p->set_regs(d.regs);
    p->set_unreliable(d.unreliable);
    ToProto(d.answer, p->mutable_frame());
  }
  out->set_lines(r.lines);
  out->set_pinned(r.pinned);
  out->set_ambiguous(r.ambiguous);
  out->set_unanswered(r.unanswered);
}

const VerbWire& WireOf(const char* service, const char* method,
                       std::string (*check)(const google::protobuf::Descriptor* req,
                                            const google::protobuf::Descriptor* resp)) {
  static std::mutex mu;
  static std::map<std::string, VerbWire, std::less<>> known;
  std::lock_guard<std::mutex> l(mu);
  const std::string key = StrCat(service, ".", method);
  if (auto it = known.find(key); it != known.end()) return it->second;
  const google::protobuf::ServiceDescriptor* s = pb::ResolveRequest::descriptor()->file()->FindServiceByName(service);
  const google::protobuf::MethodDescriptor* m = s == nullptr ? nullptr : s->FindMethodByName(method);
  std::string problems =
      m == nullptr ? StrCat("no method ", key, " in symdex.proto") : check(m->input_type(), m->output_type());
  if (!problems.empty()) {
    std::fprintf(stderr, "symdex: the verb %s does not match symdex.proto: %s\n", key.c_str(), problems.c_str());
    std::abort();
  }
  auto* factory = google::protobuf::MessageFactory::generated_factory();
  VerbWire w{StrCat("/", s->full_name(), "/", m->name()), m->index(), factory->GetPrototype(m->input_type()),
             factory->GetPrototype(m->output_type())};
  return known.emplace(key, std::move(w)).first->second;
}

}  // namespace symdex::api

#undef SYMDEX_TAKE
