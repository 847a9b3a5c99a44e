// `symdex decode [FILE|-]`: a kernel log (oops, WARN, KASAN, lockdep, sysrq, /proc/PID/stack),
// ftrace stacktrace, perf script or bpftrace kstack output, with every kernel frame pinned to the
// instance it is (query/decode.h). The text is kept as it is; each frame gets its answer after it.
#include <fmt/core.h>

#include <algorithm>
#include <iterator>

#include "client/cli_common.h"
#include "server/common/file_util.h"
#include "server/common/hex.h"
#include "server/common/strings.h"

namespace symdex::cli {
namespace {

// The limit ingest::ScanKernelLog enforces (query/decode.h reads ingest/kernel_log.h); the CLI
// reads one byte more so that the scanner, not a short read, reports a log that is too big.
constexpr size_t kMaxInputBytes = (size_t{64} << 20) + 1;

struct DecodeOptions {
  KernelOfInput kernel;
  std::string input = "-";
  bool only_frames = false;
};

std::string Location(const Frame& f) {
  std::string out = f.file.empty() ? std::string("??") : f.file;
  if (f.line > 0) out += fmt::format(":{}", f.line);
  if (f.column > 0) out += fmt::format(":{}", f.column);
  return out;
}

// What follows a frame: the instance and where, or why not. Inlined-by lines go to `more`.
std::string Decoration(const query::DecodedFrame& d, std::vector<std::string>& more) {
  const query::FrameAnswer& a = d.answer;
  if (!a.error.empty()) return fmt::format(" {{?? {}}}", a.error);
  if (!a.candidates.empty()) {
    return fmt::format(" {{ambiguous: {}}} ({})", EscapeControl(StrJoin(a.candidates, " | ")), Escaped{a.note});
  }
  if (!a.info->symbol) return fmt::format(" {{?? {}}}", a.note.empty() ? a.info->note : a.note);
  std::string out = " {" + EscapeControl(a.canonical) + "}";
  const auto& frames = a.info->frames;
  if (!frames.empty()) {
    out += " " + Location(frames.front());
    if (frames.size() > 1) out += " " + frames.front().function;
    for (size_t i = 1; i < frames.size(); ++i) {
      more.push_back(fmt::format("inlined by {} {}", Location(frames[i]), frames[i].function));
    }
  }
  if (!a.exact && !a.note.empty()) out += " (" + a.note + ")";
  return out;
}

nlohmann::json FrameJson(std::string_view line, const query::DecodedFrame& d) {
  nlohmann::json j = FrameAnswerJson(d.answer);
  j["line"] = d.line + 1;
  j["text"] = std::string(line.substr(d.begin, d.end - d.begin));
  j["regs"] = d.regs;
  j["unreliable"] = d.unreliable;
  return j;
}

int RunDecode(const GlobalOptions& g, const DecodeOptions& o) {
  query::DecodeRequest req;
  if (int failed = 0;
      !ReadComposedRequest(g, o.kernel, o.input, kMaxInputBytes, &query::DecodeRequest::text, req, failed)) {
    return failed;
  }
  auto api = OpenQuery(g);
  if (!api.ok()) return Fail(g, api.status());
  auto r = query::Decode(**api, req);
  if (!r.ok()) return Fail(g, r.status());
  const int code = r->ambiguous ? kAmbiguous : r->unanswered ? kNotFound : kFound;

  // The lines again, as the decoder split them (its offsets are into these).
  std::vector<std::string_view> lines;
  for (std::string_view rest = req.text; !rest.empty();) {
    size_t nl = rest.find('\n');
    std::string_view line = rest.substr(0, nl);
    if (line.ends_with('\r')) line.remove_suffix(1);
    lines.push_back(line);
    if (nl == std::string_view::npos) break;
    rest.remove_prefix(nl + 1);
  }
  if (g.json) {
    nlohmann::json frames = nlohmann::json::array();
    for (const auto& d : r->frames) frames.push_back(FrameJson(d.line < lines.size() ? lines[d.line] : "", d));
    nlohmann::json j = {{"target", r->target.name},  {"target_reason", r->target_reason},
                        {"release", r->release},     {"slide_reason", r->slide_reason},
                        {"frames", frames},          {"pinned", r->pinned},
                        {"ambiguous", r->ambiguous}, {"unanswered", r->unanswered}};
    j["slide"] = r->slide ? nlohmann::json(fmt::format("{:#x}", *r->slide)) : nlohmann::json(nullptr);
    PrintJson(j);
    return code;
  }
  std::string out;
  auto to = std::back_inserter(out);
  size_t next = 0;
  for (size_t n = 0; n < lines.size(); ++n) {
    const bool has = next < r->frames.size() && r->frames[next].line == n;
    if (!has) {
      if (!o.only_frames) fmt::format_to(to, "{}\n", lines[n]);
      continue;
    }
    const query::DecodedFrame& d = r->frames[next++];
    std::vector<std::string> more;
    const std::string deco = Decoration(d, more);
    std::string_view line = lines[n];
    fmt::format_to(to, "{}{}{}\n", line.substr(0, d.end), deco, line.substr(d.end));
    const std::string indent(d.begin + 2, ' ');
    for (const std::string& m : more) fmt::format_to(to, "{}{}\n", indent, m);
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  if (!r->frames.empty()) {
    fmt::print(stderr, "symdex decode: target {} ({}); {} frames: {} pinned, {} ambiguous, {} not answered{}\n",
               r->target.name, r->target_reason, r->frames.size(), r->pinned, r->ambiguous, r->unanswered,
               r->slide_reason.empty() ? "" : fmt::format("; addresses: {}", r->slide_reason));
  } else {
    fmt::print(stderr, "symdex decode: no kernel frames found in the input\n");
  }
  return code;
}

}  // namespace

void AddDecodeCommand(CLI::App& app, GlobalOptions& g, int& exit_code) {
  auto o = std::make_shared<DecodeOptions>();
  CLI::App* dc = app.add_subcommand(
      "decode", "A kernel log, perf script or bpftrace stack with each kernel frame pinned to its instance");
  dc->add_option("FILE", o->input, "The text to decode ('-' or nothing: standard input)");
  AddKernelOfInputOptions(
      dc, o->kernel, "Target (default: the one whose release the log prints, else 'host' or the only one)",
      "The vmlinux build-ID of the kernel that printed the log: the target to answer from, and checked",
      "That kernel's _text (_stext on arm64), for the addresses the log prints (perf script); default: learnt "
      "from frames that print an address and a unique symbol+offset");
  dc->add_flag("--frames-only", o->only_frames, "Print only the lines that hold kernel frames");
  dc->footer(R"(Reads: oops/WARN/BUG/KASAN/KFENCE/lockdep reports and sysrq backtraces (dmesg, journalctl -k,
serial consoles; timestamps and prefixes are kept), /proc/PID/stack, ftrace '=>' stacktraces
(options/sym-offset), 'perf script' (kernel frames; -F +symoff or an address), bpftrace kstack.
Each frame is followed by {its canonical spec} FILE:LINE:COL, and one 'inlined by' line per
enclosing inlined call. A duplicated name is pinned by the size the kernel printed, the offset
fitting, the call instruction before a return address, and the direct call from the frame
below; a frame still ambiguous lists {ambiguous: its candidates} and why.
Example: dmesg | symdex decode --frames-only;  symdex decode --build-id HEX oops.txt
Exit: 0 every frame pinned, 1 some not answered, 2 some ambiguous or usage, 3 no index/input.)");
  dc->callback([&g, &exit_code, o] { exit_code = RunDecode(g, *o); });
}

}  // namespace symdex::cli
