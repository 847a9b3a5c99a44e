// The address verbs: addr (address -> symbol+offset, file:line, inline chain, like addr2line) and
// lines (source line -> every address, like perf probe's SRC:ALN).
#include <fmt/compile.h>
#include <fmt/format.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>

#include "client/cli_common.h"
#include "client/json_text.h"
#include "server/common/hex.h"
#include "server/common/strings.h"

namespace symdex::cli {
namespace {

struct AddrOptions {
  std::string target;
  std::vector<std::string> addrs;
};

// Into a fmt::memory_buffer (appender): several times cheaper per call than a back_inserter into a
// std::string, and 46k addresses make ~100k calls.
void PrintAddress(uint64_t a, const query::AddressInfo& info, fmt::memory_buffer& out) {
  auto to = fmt::appender(out);
  if (!info.symbol) {
    // One line, addr2line's "??" and why: "not in vmlinux or any module", ...
    if (info.note.empty()) {
      fmt::format_to(to, FMT_COMPILE("0x{:x}: ??\n"), a);
    } else {
      fmt::format_to(to, FMT_COMPILE("0x{:x}: ?? ({})\n"), a, info.note);
    }
    return;
  }
  const auto& s = *info.symbol;
  fmt::format_to(to, FMT_COMPILE("0x{:x}: {}+{:#x}"), a, Escaped{s.name}, info.offset);
  if (s.size) fmt::format_to(to, FMT_COMPILE("/{:#x}"), *s.size);
  fmt::format_to(to, FMT_COMPILE(" [{}]\n"), Escaped{s.module.empty() ? std::string_view("vmlinux") : s.module});
  for (size_t i = 0; i < info.frames.size(); ++i) {
    const auto& f = info.frames[i];
    fmt::format_to(to, FMT_COMPILE("    {}{} at {}:{}"), i ? "(inlined by) " : "", f.function,
                   f.file.empty() ? std::string_view("??") : f.file, f.line);
    if (f.column) fmt::format_to(to, FMT_COMPILE(":{}"), f.column);
    out.push_back('\n');
  }
  if (!info.note.empty()) fmt::format_to(to, FMT_COMPILE("    [{}]\n"), info.note);
}

// {address, frames: [{column, file, function, line}], module, note, offset, size, symbol}, the
// symbol's four only when there is one and the note only when set, written as text (json_text.h).
void AddressJson(uint64_t a, const query::AddressInfo& info, std::string& out) {
  JsonText j(out, 4);
  char hex[24];
  const char* end = fmt::format_to(hex, FMT_COMPILE("0x{:x}"), a);
  j.BeginObject().Key("address").String(std::string_view(hex, static_cast<size_t>(end - hex))).Key("frames");
  j.BeginArray();
  for (const auto& f : info.frames) {
    j.BeginObject().Key("column").Int(f.column).Key("file").String(f.file).Key("function").String(f.function);
    j.Key("line").Int(f.line).EndObject();
  }
  j.EndArray();
  if (info.symbol) j.Key("module").String(info.symbol->module.empty() ? "vmlinux" : info.symbol->module);
  if (!info.note.empty()) j.Key("note").String(info.note);
  if (info.symbol) {
    j.Key("offset").UInt(info.offset).Key("size");
    if (info.symbol->size) {
      j.UInt(*info.symbol->size);
    } else {
      j.Null();
    }
    j.Key("symbol").String(info.symbol->name);
  }
  j.EndObject();
}

// Addresses from the arguments, and from stdin for '-', answered in batches: a batch is sent
// when it is full or when stdin has nothing more ready, so a program talking to `symdex addr -`
// through a pipe gets each answer as soon as it has written the address (as with addr2line),
// and a file of a million addresses streams through in constant memory.
int RunAddr(const GlobalOptions& g, const AddrOptions& o) {
  auto api = OpenQuery(g);
  if (!api.ok()) return Fail(g, api.status());
  constexpr size_t kBatch = 4096;  // one batch's answers freed before the next is made: the same pages reused
  int worst = kFound;
  std::vector<uint64_t> batch;
  JsonArrayOut arr("results");
  std::string target_name;
  fmt::memory_buffer out;
  // Many addresses answered from DWARF because vmlinux's address map is missing or unusable
  // (an index from before address maps, a damaged file): say so once, with the cure.
  size_t asked = 0;
  bool hinted = false;
  auto hint = [&] {
    hinted = true;
    auto status = (*api)->Ask<query::IndexStatus>({.index = true, .addr_maps_only = true});
    if (!status.ok() || !status->index) return;
    for (const auto& ts : status->index->targets) {
      const query::AddrMapState& am = ts.addr_map;
      if (ts.summary.info.name != target_name ||
          (am.status != query::AddrMapStatus::kMissing && am.status != query::AddrMapStatus::kInvalid)) {
        continue;
      }
      fmt::print(stderr,
                 "symdex: note: vmlinux's address map is {} ({}): answering from DWARF, several times slower; "
                 "'symdex index' writes it\n",
                 query::AddrMapStatusName(am.status),
                 am.status == query::AddrMapStatus::kMissing ? am.path : am.detail);
    }
  };
  auto answer = [&]() -> absl::Status {
    if (batch.empty()) return absl::OkStatus();
    asked += batch.size();
    ASSIGN_OR_RETURN(auto res, (*api)->Ask<query::SymbolizeAddresses>({o.target, batch}));
    target_name = res.target.name;
    if (!hinted && asked >= 1024) hint();
    out.clear();
    for (size_t i = 0; i < res.results.size(); ++i) {
      const auto& info = *res.results[i];
      if (!info.symbol) worst = std::max(worst, int{kNotFound});
      if (g.json) {
        AddressJson(batch[i], info, arr.Next());
      } else {
        PrintAddress(batch[i], info, out);
      }
    }
    if (!g.json) {
      std::fwrite(out.data(), 1, out.size(), stdout);
      std::fflush(stdout);
    }
    batch.clear();
    return absl::OkStatus();
  };
  auto add = [&](std::string_view text) -> absl::Status {
    std::string_view v = StripWhitespace(text);
    if (v.empty()) return absl::OkStatus();
    const std::optional<uint64_t> a = ParseHex(v);
    if (!a) {
      RETURN_IF_ERROR(answer());  // keep stderr and stdout in input order
      fmt::print(stderr, "symdex: '{}' is not a hex address\n", v);
      worst = std::max(worst, int{kAmbiguous});
      return absl::OkStatus();
    }
    batch.push_back(*a);
    return batch.size() >= kBatch ? answer() : absl::OkStatus();
  };
  for (const auto& arg : o.addrs) {
    absl::Status st;
    if (arg != "-") {
      st = add(arg);
    } else {
      // Answered whenever stdin has nothing more ready: the writer waits for these.
      st = ForEachStdinLine(4096, "an address", add, [&]() { return batch.empty() ? absl::OkStatus() : answer(); });
    }
    if (st.ok()) st = answer();
    if (!st.ok()) return Fail(g, st);
  }
  return FinishAnswers(g, **api, o.target, target_name, arr, worst);
}

struct LinesOptions {
  std::string target;
  std::string where;  // PATH:LINE
};

// Every address of a source line in vmlinux, with the function (innermost, inlined or not) each
// belongs to: perf probe's SRC:ALN.
int RunLines(const GlobalOptions& g, const LinesOptions& o) {
  size_t colon = o.where.rfind(':');
  int line = colon == std::string::npos ? 0 : std::atoi(o.where.c_str() + colon + 1);
  if (colon == std::string::npos || colon == 0 || line <= 0) {
    return Fail(g, absl::InvalidArgumentError(StrCat("expected PATH:LINE, got '", o.where, "'")));
  }
  std::string file = o.where.substr(0, colon);
  auto api = OpenQuery(g);
  if (!api.ok()) return Fail(g, api.status());
  auto res = (*api)->Ask<query::Lines>({.target = o.target, .file = file, .line = line});
  if (!res.ok() && res.status().code() == absl::StatusCode::kNotFound) {
    Fail(g, res.status());
    return kNotFound;
  }
  if (!res.ok()) return Fail(g, res.status());
  nlohmann::json arr = nlohmann::json::array();
  for (const query::LineAddress& info : res->addresses) {
    const uint64_t a = info.address;
    std::string fn = info.frames.empty() ? "??" : info.frames.front().function;
    std::string sym = info.symbol ? fmt::format("{}+{:#x}", Escaped{info.symbol->name}, info.offset) : "??";
    // vmlinux: _text+N (KASLR-proof; _stext+N where kallsyms lists no _text); a loaded module: its
    // address (what kprobe_events takes).
    std::string probe = !info.symbol ? ""
                        : info.symbol->text_offset
                            ? fmt::format("{}+{}", info.symbol->text_anchor, *info.symbol->text_offset + info.offset)
                        : !info.symbol->module.empty() ? fmt::format("0x{:x}", a)
                                                       : "";
    if (g.json) {
      arr.push_back({{"address", fmt::format("0x{:x}", a)}, {"function", fn}, {"symbol", sym}, {"probe", probe}});
    } else {
      fmt::print("0x{:016x}  {:<40} {:<28} {}\n", a, sym, fn, probe);
    }
  }
  if (g.json) PrintJson({{"target", res->target.name}, {"where", o.where}, {"addresses", arr}});
  if (res->addresses.empty() && !g.json)
    fmt::print(stderr, "symdex: no code for {} in vmlinux or its modules\n", o.where);
  return res->addresses.empty() ? kNotFound : kFound;
}

}  // namespace

void AddAddrCommands(CLI::App& app, GlobalOptions& g, int& exit_code) {
  auto ad = std::make_shared<AddrOptions>();
  CLI::App* addr = app.add_subcommand("addr", "Address -> symbol+offset, file:line:column and the inline chain");
  addr->add_option("ADDR", ad->addrs, "Hex addresses (0x optional); '-' reads them from stdin, like addr2line")
      ->required();
  AddTargetOptions(addr, ad->target, "Target (default: 'host', or the only one); KASLR is handled");
  addr->footer(R"(Frames are printed leaf first: the innermost inlined function, then '(inlined by)' each caller up
to the containing function, as addr2line -i / llvm-symbolizer do.
Exit: 0 every address in a known symbol, 1 some not, 2 malformed input, 3 no index.)");
  addr->callback([&g, &exit_code, ad] { exit_code = RunAddr(g, *ad); });

  auto ln = std::make_shared<LinesOptions>();
  CLI::App* lines =
      app.add_subcommand("lines", "Every address and function for a source line (vmlinux and loaded modules)");
  lines->add_option("PATH:LINE", ln->where, "Source path (suffix on whole components) and line")->required();
  AddTargetOptions(lines, ln->target, "Target (default: 'host', or the only one)");
  lines->footer(R"(Columns: address, symbol+offset, the function the code belongs to (an inlined callee when
the line was inlined), and the kprobe target for that address: _text+N in vmlinux, the
address in a loaded module. Module code is found in the modules whose debug info names the
file; an offline target's modules have no addresses (exit 1 says which modules have the line).
Exit: 0 some code, 1 none (or only in modules without addresses), 2 malformed, 3 no index.)");
  lines->callback([&g, &exit_code, ln] { exit_code = RunLines(g, *ln); });
}

}  // namespace symdex::cli
