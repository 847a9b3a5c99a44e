// Fuzzes perf probe's argument syntax (ingest/probe_arg.h) and kprobe_events' fetch args
// (ingest/kprobe_fetch.h), the latter written on into bpftrace and C (query/tracer_fetches.h):
// any bytes give a record or an error, and a record keeps what the grammar promises. The same
// bytes as x86-64 code (ingest/x86_insn.h): a length within them and within 15, or none.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "server/common/kernel_arch.h"
#include "server/ingest/kprobe_fetch.h"
#include "server/ingest/probe_arg.h"
#include "server/ingest/x86_insn.h"
#include "server/query/tracer_fetches.h"

namespace {

void FetchArg(std::string_view text) {
  auto f = symdex::ingest::ParseKprobeFetch(text, 1);
  if (!f.ok()) return;
  if (f->text != text || f->name.empty()) __builtin_trap();
  if (f->reads.size() > symdex::ingest::kMaxKprobeFetchReads + 1) __builtin_trap();
  if (f->kind == symdex::ingest::KprobeFetch::Kind::kBitfield && f->bit_width + f->bit_offset > f->bits) {
    __builtin_trap();
  }
  for (const auto& arch : symdex::KnownArchs()) {
    auto bt = symdex::query::BpftraceProgram("kprobe:f", {*f}, arch);
    auto c = symdex::query::CFetchStruct("e", "p:g/e f", {*f}, arch);
    if (bt.ok() && bt->empty()) __builtin_trap();
    if (c.ok() && c->empty()) __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  FetchArg(text);
  if (auto n = symdex::ingest::X86InsnLength({data, size}); n && (*n == 0 || *n > size || *n > 15)) __builtin_trap();
  auto a = symdex::ingest::ParseProbeArg(text);
  if (!a.ok()) return 0;
  using Kind = symdex::ingest::ProbeArg::Kind;
  if (a->text != text) __builtin_trap();
  if (!a->name.empty() && !symdex::ingest::IsCName(a->name)) __builtin_trap();
  if (a->kind == Kind::kVariable) {
    if (!symdex::ingest::IsCName(a->var)) __builtin_trap();
    for (const auto& f : a->fields) {
      if (f.index.has_value() == !f.member.empty()) __builtin_trap();  // a member or an index
      if (!f.member.empty() && !symdex::ingest::IsCName(f.member)) __builtin_trap();
    }
    if (a->fields.size() > symdex::ingest::kMaxProbeArgFields) __builtin_trap();
  }
  if (a->kind != Kind::kRaw && !a->type.empty() && !symdex::ingest::IsFetchType(a->type) && a->type != "u" &&
      a->type != "s" && a->type != "x") {
    __builtin_trap();
  }
  return 0;
}
