// Fuzzes perf probe's argument syntax (ingest/probe_arg.h): any bytes give a record or an error,
// and a record keeps what the grammar promises.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "server/ingest/probe_arg.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
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
