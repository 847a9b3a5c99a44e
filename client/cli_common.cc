#include "client/cli_common.h"

#include <poll.h>

#include <fmt/core.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include "client/remote_module.h"
#include "server/common/file_util.h"
#include "server/common/hex.h"
#include "server/common/strings.h"

namespace symdex::cli {

std::string DbPath(const GlobalOptions& g) {
  if (!g.db.empty()) return g.db;
  if (const char* env = std::getenv("SYMDEX_DB"); env && *env) return env;
  return DefaultIndexPath();
}

int Fail(const GlobalOptions& g, const absl::Status& s, bool input_error) {
  int code = !input_error && s.code() == absl::StatusCode::kInvalidArgument ? kAmbiguous : kEnvError;
  if (g.json) {
    PrintJson({{"error", {{"code", absl::StatusCodeToString(s.code())}, {"message", std::string(s.message())}}}});
  } else {
    fmt::print(stderr, "symdex: {}\n", EscapeControl(std::string_view(s.message().data(), s.message().size())));
  }
  return code;
}

absl::StatusOr<std::unique_ptr<query::QueryApi>> OpenQuery(const GlobalOptions& g) {
  std::string address = g.connect;
  const char* env_db = std::getenv("SYMDEX_DB");
  if (address.empty() && !g.local && g.db.empty() && !(env_db && *env_db) && UnixSocketAnswers(kDefaultSocket)) {
    address = StrCat("unix:", kDefaultSocket);
  }
  if (!address.empty()) {
    api::ConnectOptions c;
    c.address = address;
    c.tls_ca = g.tls_ca;
    c.tls_cert = g.tls_cert;
    c.tls_key = g.tls_key;
    c.tls_server_name = g.tls_server_name;
    if (g.timeout > 0) c.deadline_seconds = c.fleet_deadline_seconds = g.timeout;
    return ConnectRemote(c);
  }
  return query::OpenEmbeddedApi(DbPath(g));
}

absl::Status ForEachStdinLine(size_t max_line, std::string_view what,
                              const std::function<absl::Status(std::string_view)>& line,
                              const std::function<absl::Status()>& idle) {
  auto stdin_ready = [] {
    pollfd p{STDIN_FILENO, POLLIN, 0};
    return ::poll(&p, 1, 0) > 0;
  };
  std::string buf(1 << 16, '\0'), partial;
  for (;;) {
    if (idle && !stdin_ready()) RETURN_IF_ERROR(idle());
    ssize_t n = ::read(STDIN_FILENO, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    std::string_view chunk(buf.data(), static_cast<size_t>(n));
    for (size_t nl; (nl = chunk.find('\n')) != std::string_view::npos;) {
      partial.append(chunk.substr(0, nl));
      RETURN_IF_ERROR(line(partial));
      partial.clear();
      chunk.remove_prefix(nl + 1);
    }
    partial.append(chunk);
    if (partial.size() > max_line) {
      return absl::InvalidArgumentError(StrCat("a line of stdin is over ", max_line, " bytes: not ", what));
    }
  }
  return line(partial);
}

void PrintJson(const nlohmann::json& j) { fmt::print("{}\n", j.dump(2)); }

namespace {
// `text` (a dump(2)) as it reads nested `by` spaces deeper: JSON text has no raw newlines but
// its own.
void AppendIndented(std::string_view text, size_t by, std::string& out) {
  out.append(by, ' ');
  for (char c : text) {
    out.push_back(c);
    if (c == '\n') out.append(by, ' ');
  }
}
}  // namespace

void JsonArrayOut::Add(const nlohmann::json& element) {
  std::string& out = Next();
  out.resize(out.size() - 4);  // AppendIndented indents the first line itself
  AppendIndented(element.dump(2), 4, out);
}

std::string& JsonArrayOut::Next() {
  if (!chunks_.empty()) chunks_.back() += ",\n";
  if (chunks_.empty() || chunks_.back().size() >= kChunk) {
    chunks_.emplace_back().reserve(kChunk + kChunk / 4);
  }
  chunks_.back().append(4, ' ');
  return chunks_.back();
}

void JsonArrayOut::Print(const nlohmann::json& rest) const {
  // (The elements, megabytes for a large batch, are written where they are, not copied.)
  std::string out = "{\n  " + nlohmann::json(key_).dump() + ": ";
  if (chunks_.empty()) {
    out += "[]";
  } else {
    out += "[\n";
    std::fwrite(out.data(), 1, out.size(), stdout);
    for (const std::string& c : chunks_) std::fwrite(c.data(), 1, c.size(), stdout);
    out = "\n  ]";
  }
  for (const auto& [k, v] : rest.items()) {
    out += ",\n  " + nlohmann::json(k).dump() + ": ";
    std::string value;
    AppendIndented(v.dump(2), 2, value);
    out.append(value, 2);  // the first line follows the key
  }
  out += "\n}\n";
  std::fwrite(out.data(), 1, out.size(), stdout);
}

std::string Hex(uint64_t v) { return fmt::format("{:016x}", v); }

std::string FormatTime(int64_t unix) {
  std::time_t t = static_cast<std::time_t>(unix);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

nlohmann::json VerdictJson(const query::ProbeVerdict& v) {
  return {{"kind", std::string(query::ProbeabilityName(v.kind))},
          {"kprobe", v.kprobe},
          {"ftrace", v.ftrace},
          {"ftrace_lines", (v.ftrace ? 1u : 0u) + v.far_ftrace_sites()},
          {"reason", v.reason}};
}

void AddTargetOptions(CLI::App* verb, std::string& target, const std::string& help) {
  CLI::Option* t = verb->add_option("-t,--target", target, help);
  verb->add_option_function<std::string>(
          "--build-id", [&target](const std::string& hex) { target = std::string(query::kBuildIdTargetPrefix) + hex; },
          "The target whose vmlinux build-ID is HEX (see 'symdex index --build-id')")
      ->excludes(t);
}

nlohmann::json FrameAnswerJson(const query::FrameAnswer& a) {
  nlohmann::json frames = nlohmann::json::array();
  for (const auto& f : a.info->frames) {
    frames.push_back({{"function", f.function}, {"file", f.file}, {"line", f.line}, {"column", f.column}});
  }
  nlohmann::json j = {
      {"basis", std::string(query::FrameBasisName(a.basis))}, {"exact", a.exact}, {"frames", std::move(frames)}};
  if (a.info->symbol) {
    j["symbol"] = a.info->symbol->name;
    j["module"] = a.info->symbol->module.empty() ? "vmlinux" : a.info->symbol->module;
    j["offset"] = a.info->offset;
    j["size"] = a.info->symbol->size ? nlohmann::json(*a.info->symbol->size) : nlohmann::json(nullptr);
    j["spec"] = a.canonical;
  }
  if (a.target_address) j["target_address"] = fmt::format("0x{:x}", *a.target_address);
  if (!a.section.empty()) {
    j["section"] = a.section;
    j["section_offset"] = a.section_offset;
  }
  if (!a.candidates.empty()) j["candidates"] = a.candidates;
  if (!a.note.empty()) j["note"] = a.note;
  if (!a.error.empty()) j["error"] = a.error;
  return j;
}

absl::Status ParseKernelBase(const std::string& text, const std::string& kaslr_offset,
                             std::optional<uint64_t>& host_text, std::optional<int64_t>& kaslr) {
  if (!text.empty()) {
    host_text = ParseHex(text);
    if (!host_text) return absl::InvalidArgumentError(StrCat("--kernel-text ", text, ": not a hex address"));
  }
  if (!kaslr_offset.empty()) {
    std::optional<uint64_t> off = ParseHex(kaslr_offset);
    if (!off) return absl::InvalidArgumentError(StrCat("--kaslr-offset ", kaslr_offset, ": not a hex number"));
    kaslr = static_cast<int64_t>(*off);
  }
  return absl::OkStatus();
}

void AddKernelOfInputOptions(CLI::App* verb, KernelOfInput& o, const std::string& target_help,
                             const std::string& build_id_help, const std::string& text_help) {
  AddTargetOptions(verb, o.target, target_help);
  verb->add_option("--kernel-build-id", o.kernel_build_id, build_id_help);
  auto* text = verb->add_option("--kernel-text", o.text, text_help);
  verb->add_option("--kaslr-offset", o.kaslr_offset, "Its KASLR offset (hex), instead of --kernel-text")
      ->excludes(text);
}

int FinishAnswers(const GlobalOptions& g, query::QueryApi& api, const std::string& target, std::string target_name,
                  const JsonArrayOut& answers, int worst) {
  if (target_name.empty()) {
    auto res = api.Ask<query::SymbolizeAddresses>({target, {}});
    if (!res.ok()) return Fail(g, res.status());
    target_name = res->target.name;
  }
  if (g.json) answers.Print({{"target", target_name}});
  return worst;
}

absl::StatusOr<std::string> ReadInputFile(const std::string& path, size_t max_bytes) {
  return ReadFileBounded(path == "-" ? std::string("/dev/stdin") : path, max_bytes);
}

}  // namespace symdex::cli
