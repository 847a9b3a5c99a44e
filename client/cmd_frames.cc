// `symdex frames`: stack frames from another machine (a kernel log, perf script, a profiler's
// addresses), symbolized against that machine's kernel — typically known here only by its
// build-ID (query/answers.h says which forms are exact).
#include <fmt/compile.h>
#include <fmt/core.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <future>
#include <iterator>

#include "client/cli_common.h"
#include "server/common/file_util.h"
#include "server/common/hex.h"
#include "server/common/strings.h"

namespace symdex::cli {
namespace {

struct FramesOptions {
  std::string target;
  std::string kernel_build_id;
  std::string text, kaslr_offset;
  std::vector<std::string> modules;  // NAME[=BUILDID][@TEXTBASE]
  std::string modules_from;          // a copy of the machine's /sys/module
  std::string kernel_notes;          // a copy of the machine's /sys/kernel/notes
  std::vector<std::string> frames;
};

constexpr size_t kMaxNotesBytes = 1 << 16;
constexpr size_t kMaxSectionFileBytes = 64;
constexpr size_t kMaxSysModuleEntries = 16384;

absl::StatusOr<std::string> BuildIdFromNotes(const std::string& path) {
  ASSIGN_OR_RETURN(std::string notes, ReadFileBounded(path, kMaxNotesBytes));
  auto id = query::NotesBuildId(notes);
  if (!id.ok()) return absl::InvalidArgumentError(StrCat(path, ": ", id.status().message()));
  return *id;
}

// Every module in a copy of a machine's /sys/module with its section bases (DIR/M/sections/*)
// and build-ID (DIR/M/notes/.note.gnu.build-id); built-in "modules" (no sections/) are skipped.
absl::StatusOr<std::vector<query::FrameModule>> ModulesFrom(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) return absl::NotFoundError(StrCat("--modules-from ", dir, ": ", ec.message()));
  std::vector<query::FrameModule> out;
  size_t seen = 0;
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec || ++seen > kMaxSysModuleEntries) break;
    const fs::path sections = it->path() / "sections";
    if (!fs::is_directory(sections, ec)) continue;
    query::FrameModule m;
    m.name = it->path().filename().string();
    for (const auto& sec : fs::directory_iterator(sections, ec)) {
      if (m.sections.size() >= query::kMaxSectionsPerModule) break;
      auto text = ReadFileBounded(sec.path().string(), kMaxSectionFileBytes);
      if (!text.ok()) continue;  // unreadable (0400 root files): the section stays unplaced
      std::optional<uint64_t> base = ParseHex(StripWhitespace(*text));
      if (base && *base != 0) m.sections.emplace_back(sec.path().filename().string(), *base);
    }
    std::sort(m.sections.begin(), m.sections.end());
    const std::string note = (it->path() / "notes" / ".note.gnu.build-id").string();
    if (fs::exists(note, ec)) {
      ASSIGN_OR_RETURN(m.build_id, BuildIdFromNotes(note));
    }
    if (!m.sections.empty()) out.push_back(std::move(m));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  return out;
}

// Frames per SymbolizeFrames call. Batches are pipelined: up to kInFlight are being answered (by
// symdexd, or by the embedded index on other threads) while the one before them is printed; so
// the answers held are bounded whatever the input's size.
size_t BatchSize() {
  if (const char* e = std::getenv("SYMDEX_FRAMES_BATCH"))
    return std::clamp<size_t>(std::strtoul(e, nullptr, 10), 1, 65536);
  return 4096;
}
constexpr size_t kInFlight = 2;

absl::StatusOr<query::FrameModule> ParseModule(const std::string& arg) {
  query::FrameModule m;
  std::string_view v = arg;
  const size_t at = v.find('@');
  if (at != std::string_view::npos) {
    const std::optional<uint64_t> base = ParseHex(v.substr(at + 1));
    if (!base) return absl::InvalidArgumentError(StrCat("--module ", arg, ": the base after @ is not a hex address"));
    m.sections.emplace_back(".text", *base);
    v = v.substr(0, at);
  }
  const size_t eq = v.find('=');
  m.name = std::string(v.substr(0, eq));
  if (eq != std::string_view::npos) m.build_id = std::string(v.substr(eq + 1));
  if (m.name.empty()) return absl::InvalidArgumentError(StrCat("--module ", arg, ": expected NAME[=BUILDID][@BASE]"));
  return m;
}

// NAME+OFF[/SIZE] [MODULE], as the kernel prints a frame. Formats compiled (FMT_COMPILE): a
// frames answer prints thousands of them.
void AppendSymbol(const query::FrameAnswer& a, std::string& out) {
  const query::Instance& s = *a.info->symbol;
  auto to = std::back_inserter(out);
  fmt::format_to(to, FMT_COMPILE("{}+{:#x}"), Escaped{s.name}, a.info->offset);
  if (s.size) fmt::format_to(to, FMT_COMPILE("/{:#x}"), *s.size);
  fmt::format_to(to, FMT_COMPILE(" [{}]"),
                 Escaped{s.module.empty() ? std::string_view("vmlinux") : std::string_view(s.module)});
}

void PrintFrame(const std::string& input, const query::FrameAnswer& a, std::string& out) {
  auto to = std::back_inserter(out);
  if (!a.error.empty()) {
    fmt::format_to(to, "{}\n    ?? ({})\n", input, a.error);
    return;
  }
  if (!a.info->symbol) {
    fmt::format_to(to, "{}\n    ?? ({}{})\n", input, Escaped{a.note.empty() ? "not found" : a.note},
                   a.candidates.empty() ? "" : EscapeControl(fmt::format(": {}", StrJoin(a.candidates, ", "))));
    return;
  }
  out += input;
  out += "\n    ";
  AppendSymbol(a, out);
  fmt::format_to(to, FMT_COMPILE(" ({}{})\n"), query::FrameBasisName(a.basis), a.exact ? ", exact" : ", not exact");
  for (size_t i = 0; i < a.info->frames.size(); ++i) {
    const auto& f = a.info->frames[i];
    fmt::format_to(to, FMT_COMPILE("    {}{} at {}:{}"), i ? "(inlined by) " : "", f.function,
                   f.file.empty() ? std::string_view("??") : std::string_view(f.file), f.line);
    if (f.column) fmt::format_to(to, FMT_COMPILE(":{}"), f.column);
    out.push_back('\n');
  }
  if (!a.canonical.empty()) fmt::format_to(to, FMT_COMPILE("    spec: {}\n"), Escaped{a.canonical});
  if (!a.note.empty()) fmt::format_to(to, FMT_COMPILE("    [{}]\n"), a.note);
}

nlohmann::json FrameJson(const std::string& input, const query::FrameAnswer& a) {
  nlohmann::json j = FrameAnswerJson(a);
  j["input"] = input;
  return j;
}

int RunFrames(const GlobalOptions& g, const FramesOptions& o) {
  query::FramesContext ctx;
  ctx.kernel_build_id = o.kernel_build_id;
  if (!o.kernel_notes.empty()) {
    auto id = BuildIdFromNotes(o.kernel_notes);
    if (!id.ok()) return Fail(g, id.status(), true);
    ctx.kernel_build_id = *id;
  }
  if (!o.modules_from.empty()) {
    auto mods = ModulesFrom(o.modules_from);
    if (!mods.ok()) return Fail(g, mods.status(), true);
    ctx.modules = std::move(*mods);
  }
  if (absl::Status s = ParseKernelBase(o.text, o.kaslr_offset, ctx.text, ctx.kaslr_offset); !s.ok()) return Fail(g, s);
  for (const std::string& m : o.modules) {
    auto fm = ParseModule(m);
    if (!fm.ok()) return Fail(g, fm.status());
    // Named here and found in --modules-from: this one wins.
    std::erase_if(ctx.modules, [&](const query::FrameModule& have) { return have.name == fm->name; });
    ctx.modules.push_back(std::move(*fm));
  }
  std::string target = o.target;
  if (target.empty() && !ctx.kernel_build_id.empty()) target = query::FramesTarget("", ctx);
  auto api = OpenQuery(g);
  if (!api.ok()) return Fail(g, api.status());

  int worst = kFound;
  const size_t batch_size = BatchSize();
  std::vector<std::string> inputs;
  std::vector<query::FrameIn> batch;
  struct Pending {
    std::vector<std::string> inputs;
    std::future<absl::StatusOr<query::FramesResult>> answer;
  };
  std::deque<Pending> pending;  // sent, oldest first
  JsonArrayOut arr("results");
  std::string target_name, out;
  // The oldest batch sent: waited for and printed.
  auto finish = [&]() -> absl::Status {
    if (pending.empty()) return absl::OkStatus();
    Pending p = std::move(pending.front());
    pending.pop_front();
    absl::StatusOr<query::FramesResult> res = p.answer.get();
    RETURN_IF_ERROR(res.status());
    target_name = res->target.name;
    out.clear();
    for (size_t i = 0; i < res->frames.size(); ++i) {
      const query::FrameAnswer& a = res->frames[i];
      if (!a.error.empty() || !a.candidates.empty()) {
        worst = std::max(worst, int{kAmbiguous});
      } else if (!a.info->symbol) {
        worst = std::max(worst, int{kNotFound});
      }
      if (g.json) {
        arr.Add(FrameJson(p.inputs[i], a));
      } else {
        PrintFrame(p.inputs[i], a, out);
      }
    }
    if (!g.json) {
      std::fwrite(out.data(), 1, out.size(), stdout);
      std::fflush(stdout);
    }
    return absl::OkStatus();
  };
  // Sends the batch read so far (printing the oldest first when kInFlight are out).
  auto answer = [&]() -> absl::Status {
    if (batch.empty()) return absl::OkStatus();
    if (pending.size() >= kInFlight) RETURN_IF_ERROR(finish());
    pending.push_back(
        {std::move(inputs), std::async(std::launch::async, [&api, &target, &ctx, b = std::move(batch)]() mutable {
           return (*api)->Ask<query::SymbolizeFrames>({target, ctx, std::move(b)});
         })});
    batch.clear();
    inputs.clear();
    return absl::OkStatus();
  };
  auto add = [&](std::string_view line) -> absl::Status {
    std::string_view v = StripWhitespace(line);
    if (v.empty()) return absl::OkStatus();
    query::FrameIn f;
    // A bare hex number is an address; anything else a frame as a log or perf printed it.
    if (std::optional<uint64_t> a = ParseHex(v)) {
      f.address = a;
    } else {
      f.text = std::string(v.substr(0, std::min<size_t>(v.size(), 4096)));
    }
    inputs.emplace_back(v.substr(0, std::min<size_t>(v.size(), 200)));
    batch.push_back(std::move(f));
    return batch.size() >= batch_size ? answer() : absl::OkStatus();
  };
  for (const std::string& arg : o.frames) {
    absl::Status st;
    if (arg != "-") {
      st = add(arg);
    } else {
      st = ForEachStdinLine(query::kMaxFrameTextLength, "a frame", add);
    }
    if (st.ok()) st = answer();
    while (st.ok() && !pending.empty()) st = finish();
    if (!st.ok()) return Fail(g, st);
  }
  if (g.json) arr.Print({{"target", target_name}});
  return worst;
}

}  // namespace

void AddFramesCommand(CLI::App& app, GlobalOptions& g, int& exit_code) {
  auto fo = std::make_shared<FramesOptions>();
  CLI::App* fr = app.add_subcommand(
      "frames", "Stack frames from another machine (kernel log, perf script, addresses) -> symbol, file:line, spec");
  fr->add_option("FRAME", fo->frames,
                 "A frame as the kernel or perf printed it ('name_show+0x1c/0x40 [pnp]', '[<ffffffff8123abcd>] ...', "
                 "'ffffffff8123abcd sym+0x1c ([kernel.kallsyms])') or a hex address; '-' reads lines from stdin")
      ->required();
  AddTargetOptions(fr, fo->target,
                   "Target (default: the one whose build-ID --kernel-build-id names, else 'host' or the only one)");
  auto* kbid = fr->add_option("--kernel-build-id", fo->kernel_build_id,
                              "The machine's vmlinux build-ID (/sys/kernel/notes): the target to answer from, and "
                              "checked");
  fr->add_option("--kernel-notes", fo->kernel_notes, "A copy of the machine's /sys/kernel/notes: its build-ID")
      ->excludes(kbid);
  fr->add_option("--modules-from", fo->modules_from,
                 "A copy of the machine's /sys/module (as root: M/sections/* and M/notes/.note.gnu.build-id): "
                 "every loaded module with all its section bases and its build-ID");
  auto* text = fr->add_option("--kernel-text", fo->text,
                              "The machine's _text (grep ' _text$' /proc/kallsyms as root; _stext on arm64, whose "
                              "kallsyms lists no _text): addresses are then exact");
  fr->add_option("--kaslr-offset", fo->kaslr_offset, "The machine's KASLR offset (hex), instead of --kernel-text")
      ->excludes(text);
  fr->add_option("--module", fo->modules,
                 "A module as loaded there: NAME[=BUILDID][@TEXTBASE] (/sys/module/NAME/notes, .../sections/.text); "
                 "repeatable. With a daemon's --fleet-cache, a module's debug file is fetched by its build-ID")
      ->allow_extra_args(false);  // one value per --module: the frames that follow are not modules
  fr->footer(R"(Which inputs are exact: an address with --kernel-text/--kaslr-offset (vmlinux) or inside a
--module's .text; name+off/size [mod] when that name (of that size) is unique in its module.
Otherwise the answer says 'not exact' and why, or lists the candidate specs.
Exit: 0 every frame answered, 1 some not found, 2 some ambiguous or unreadable, 3 no index/target.)");
  fr->callback([&g, &exit_code, fo] { exit_code = RunFrames(g, *fo); });
}

}  // namespace symdex::cli
