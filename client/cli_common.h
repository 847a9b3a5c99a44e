// What every `symdex` verb shares: the database location, --json, exit codes, error printing.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <functional>
#include <string>
#include <string_view>

#include "server/common/status.h"
#include "server/query/api.h"

namespace symdex::cli {

// Exit codes are a contract with scripts; what each means is declared once, in help_topics.cc
// (`symdex help exit-codes`, --help's footer, the man page).
enum Exit : int {
  kFound = 0,      // success / found
  kNotFound = 1,   // the query matched nothing
  kAmbiguous = 2,  // several candidates where one was needed, or a usage error
  kEnvError = 3,   // environment or input problem: no index, unreadable or malformed input
  kRefused = 4,    // kprobe / ftrace-index: the kernel would refuse it (the verdict says why; --force)
};

struct GlobalOptions {
  std::string db;  // resolved by DbPath()
  bool json = false;
  // The daemon: --connect unix:PATH|HOST:PORT, else the default socket when it answers (and
  // neither --db nor $SYMDEX_DB names an index), else embedded. --local forces embedded.
  std::string connect;
  bool local = false;
  std::string tls_ca, tls_cert, tls_key, tls_server_name;
  // --timeout: seconds a daemon call may take (0: the defaults, 60 s, and 900 s for calls by
  // build-ID, which may wait for a fleet replica's first fetch and index of that kernel).
  double timeout = 0;
};

inline constexpr char kDefaultSocket[] = "/run/symdex/symdex.sock";

// --db, else $SYMDEX_DB, else /var/lib/symdex/index.db as root, else
// $XDG_STATE_HOME/symdex/index.db (~/.local/state/symdex/index.db).
std::string DbPath(const GlobalOptions& g);

// Prints "symdex: <message>" to stderr (or a JSON error object to stdout with --json) and
// returns the exit code: for queries InvalidArgument (unknown or unchosen target) -> 2 and
// anything else -> 3; for `index` (input_error) every failure is an input/environment error -> 3.
int Fail(const GlobalOptions& g, const absl::Status& s, bool input_error = false);

// The query API the verbs use: the daemon (see GlobalOptions::connect) or the index, embedded.
// The output of every verb is the same either way.
absl::StatusOr<std::unique_ptr<query::QueryApi>> OpenQuery(const GlobalOptions& g);

// Fail for an answer that failed: NotFound (no copy matched) exits 1, as a query that found
// nothing; the rest as Fail says.
inline int FailAnswer(const GlobalOptions& g, const absl::Status& s) {
  const int code = Fail(g, s);
  return absl::IsNotFound(s) ? kNotFound : code;
}

void PrintJson(const nlohmann::json& j);

// PrintJson of {KEY: [elements...], rest...} for answers of thousands of elements: each element
// is turned into text when added, so the whole answer is never one tree of nodes to build and
// free (half the time of a 10,000-frame `frames --json`). The same bytes as PrintJson, printed
// by Print (nothing before it: a failure half-way still prints only its error). Every key of
// `rest` must sort after KEY (PrintJson's objects list their keys sorted).
class JsonArrayOut {
 public:
  explicit JsonArrayOut(std::string key) : key_(std::move(key)) {}
  void Add(const nlohmann::json& element);
  // Where the next element is to be written as text, already separated from the one before and
  // indented: JsonText(out, 4) writes it (json_text.h), as Add would have.
  std::string& Next();
  void Print(const nlohmann::json& rest) const;

 private:
  std::string key_;
  // ",\n"-separated, indented as inside the array, in chunks of about kChunk bytes: megabytes of
  // answers are written once, not copied again each time one string doubles.
  static constexpr size_t kChunk = size_t{1} << 20;
  std::vector<std::string> chunks_;
};

// Standard input a line at a time (read in 64 KiB chunks, not through stdio), the last line
// with or without its newline. `idle` (optional) runs whenever no more input is ready yet, so a
// program writing to us through a pipe gets its answers before it writes more (as with
// addr2line). A line over `max_line` bytes is InvalidArgument naming `what` it should have been.
absl::Status ForEachStdinLine(size_t max_line, std::string_view what,
                              const std::function<absl::Status(std::string_view)>& line,
                              const std::function<absl::Status()>& idle = nullptr);
// A verb's target options: -t/--target NAME, or --build-id HEX (the target whose vmlinux
// build-ID is HEX), both into `target`.
void AddTargetOptions(CLI::App* verb, std::string& target, const std::string& help);
// A frame's answer as JSON (frames, decode): {basis, exact, frames: [{function, file, line, column}],
// symbol, module, offset, size, spec, target_address, section, section_offset, candidates, note,
// error}, the optional ones only when set.
nlohmann::json FrameAnswerJson(const query::FrameAnswer& a);
// --kernel-text HEX / --kaslr-offset HEX (frames, decode, pprof): either, parsed; InvalidArgument
// naming the option for one that is not hex.
absl::Status ParseKernelBase(const std::string& text, const std::string& kaslr_offset,
                             std::optional<uint64_t>& host_text, std::optional<int64_t>& kaslr);
// The kernel a composed verb's input came from (decode, pprof): its target, build-ID and base.
struct KernelOfInput {
  std::string target, kernel_build_id, text, kaslr_offset;
};
// --target/--build-id, --kernel-build-id, then --kernel-text or --kaslr-offset, each with the
// verb's own help text.
void AddKernelOfInputOptions(CLI::App* verb, KernelOfInput& o, const std::string& target_help,
                             const std::string& build_id_help, const std::string& text_help);
// The request's target, kernel build-ID and base from the options; InvalidArgument as
// ParseKernelBase says.
template <typename Request>
absl::Status FillKernelOfInput(const KernelOfInput& o, Request& req) {
  req.target = o.target;
  req.kernel_build_id = o.kernel_build_id;
  return ParseKernelBase(o.text, o.kaslr_offset, req.host_text, req.kaslr_offset);
}
// A file's bytes, at most `max_bytes` ('-': standard input).
absl::StatusOr<std::string> ReadInputFile(const std::string& path, size_t max_bytes);
// A composed verb's request (decode, pprof): its kernel from the options, and its input — the file
// at `path`, at most `max_bytes` — in `req.*input`. False when either fails, said as Fail says it,
// its exit code in `code`.
template <typename Request>
bool ReadComposedRequest(const GlobalOptions& g, const KernelOfInput& kernel, const std::string& path, size_t max_bytes,
                         std::string Request::*input, Request& req, int& code) {
  if (absl::Status s = FillKernelOfInput(kernel, req); !s.ok()) {
    code = Fail(g, s);
    return false;
  }
  auto bytes = ReadInputFile(path, max_bytes);
  if (!bytes.ok()) {
    code = Fail(g, bytes.status(), true);
    return false;
  }
  req.*input = std::move(*bytes);
  return true;
}
// The end of a verb that answers a list of inputs (addr, resolve): with --json, the answers
// under the name of the target they came from; `worst`, the exit code. With no input asked
// (`target_name` empty), the target is still looked up: one that does not exist fails.
int FinishAnswers(const GlobalOptions& g, query::QueryApi& api, const std::string& target, std::string target_name,
                  const JsonArrayOut& answers, int worst);
// An instance's probe verdict as JSON: {kind, kprobe, ftrace, reason}.
nlohmann::json VerdictJson(const query::ProbeVerdict& v);

std::string Hex(uint64_t v);           // "ffffffff81000000"
std::string FormatTime(int64_t unix);  // "2026-11-29 23:59:01 UTC"

// Registers the verbs' subcommands on `app` (cli_main.cc calls them in --help's order); each
// returns its exit code through `exit_code`.
void AddIndexCommand(CLI::App& app, GlobalOptions& g, int& exit_code);      // index (cmd_index.cc)
void AddWhichCommands(CLI::App& app, GlobalOptions& g, int& exit_code);     // which, inlined (cmd_which.cc)
void AddListingCommands(CLI::App& app, GlobalOptions& g, int& exit_code);   // dups, symbols (cmd_listing.cc)
void AddStatusCommand(CLI::App& app, GlobalOptions& g, int& exit_code);     // status (cmd_status.cc)
void AddResolveCommand(CLI::App& app, GlobalOptions& g, int& exit_code);    // resolve (cmd_resolve.cc)
void AddKprobeCommands(CLI::App& app, GlobalOptions& g, int& exit_code);    // kprobe, vars, callers (cmd_kprobe.cc)
void AddKallsymsCommands(CLI::App& app, GlobalOptions& g, int& exit_code);  // ftrace-index, kallsyms (cmd_kallsyms.cc)
void AddAddrCommands(CLI::App& app, GlobalOptions& g, int& exit_code);      // addr, lines (cmd_addr.cc)
void AddFramesCommand(CLI::App& app, GlobalOptions& g, int& exit_code);     // frames (cmd_frames.cc)
void AddDecodeCommand(CLI::App& app, GlobalOptions& g, int& exit_code);     // decode (cmd_decode.cc)
void AddPprofCommand(CLI::App& app, GlobalOptions& g, int& exit_code);      // pprof (cmd_pprof.cc)
void AddHelpCommand(CLI::App& app, int& exit_code);                         // help TOPIC (help_topics.cc)
void AddJitCommands(CLI::App& app, GlobalOptions& g, int& exit_code);       // jit ... (cmd_jit.cc, cmd_jit_dsos.cc)
void AddBuildIdCommand(CLI::App& app, GlobalOptions& g, int& exit_code);    // buildid (cmd_buildid.cc)

// The whole command line (client/cli_main.cc): parses argv, runs the verb, returns the exit code.
int Main(int argc, char** argv);

}  // namespace symdex::cli
