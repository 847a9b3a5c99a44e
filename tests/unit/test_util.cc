#include "tests/unit/test_util.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace symdex::testing {
namespace fs = std::filesystem;

TempDir::TempDir() {
  std::string tmpl = (fs::temp_directory_path() / "symdex-test-XXXXXX").string();
  char* p = ::mkdtemp(tmpl.data());
  if (p == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = p;
}

TempDir::~TempDir() {
  std::error_code ec;
  if (std::getenv("SYMDEX_TEST_KEEP_TMP") == nullptr) fs::remove_all(path_, ec);
}

void WriteFile(const std::string& path, const std::string& content) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream f(path, std::ios::binary);
  f << content;
  if (!f) throw std::runtime_error("cannot write " + path);
}

CommandResult RunCommand(const std::string& cmd) {
  TempDir d;
  std::string full = "(" + cmd + ") >" + d / "out" + " 2>" + d / "err" + " </dev/null";
  int status = std::system(full.c_str());
  CommandResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = Slurp(d / "out");
  r.err = Slurp(d / "err");
  return r;
}

void MustRun(const std::string& cmd) {
  CommandResult r = RunCommand(cmd);
  if (r.exit_code != 0) throw std::runtime_error(cmd + " failed: " + r.err);
}

std::string ElfNote(uint32_t type, std::string_view name, std::string_view desc) {
  std::string out;
  auto put32 = [&](uint32_t v) { out.append(reinterpret_cast<const char*>(&v), 4); };
  put32(static_cast<uint32_t>(name.size()));
  put32(static_cast<uint32_t>(desc.size()));
  put32(type);
  out.append(name);
  out.append((4 - name.size() % 4) % 4, '\0');
  out.append(desc);
  out.append((4 - desc.size() % 4) % 4, '\0');
  return out;
}

void CompileObject(const std::string& c_source, const std::string& out_path, const std::string& flags) {
  TempDir d;
  WriteFile(d / "src.c", c_source);
  CommandResult r = RunCommand("gcc -c " + flags + " -o '" + out_path + "' '" + (d / "src.c") + "'");
  if (r.exit_code != 0) throw std::runtime_error("gcc failed: " + r.err);
}

int FreeTcpPort() {
  int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
  int port = ntohs(a.sin_port);
  ::close(s);
  return port;
}

std::string DebianDbgCorpusFile(const std::string& rel) {
  const char* home = std::getenv("HOME");
  std::string p =
      std::string(home ? home : "") + "/.cache/symdex-corpus/linux-image-6.1.0-57-cloud-amd64-dbg_6.1.192-3/" + rel;
  return std::filesystem::exists(p) ? p : "";
}

std::string Slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void LoopbackServer::Start(std::vector<std::string> argv, const std::function<bool()>& is_ready) {
  const std::string port = std::to_string(FreeTcpPort());
  for (std::string& a : argv) {
    for (size_t p; (p = a.find("{port}")) != std::string::npos;) a.replace(p, 6, port);
  }
  std::vector<char*> args;
  for (std::string& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  pid_ = ::fork();
  if (pid_ == 0) {
    ::setpgid(0, 0);
    ::execvp(args[0], args.data());
    ::_exit(127);
  }
  url_ = "http://127.0.0.1:" + port;
  // A ceiling, not an expectation: the loop ends as soon as the server answers its check.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (pid_ > 0 && !ready_) {
    ready_ = is_ready();
    if (ready_) break;
    if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
      pid_ = -1;  // exited (reaped): it will never be ready
      break;
    }
    if (std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

LoopbackServer::~LoopbackServer() { Stop(); }

void LoopbackServer::Stop() {
  if (pid_ > 0) {
    ::kill(pid_, SIGTERM);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
}

DebuginfodServer::DebuginfodServer(const std::string& served_dir) {
  Start({"debuginfod", "-F", served_dir, "-p", "{port}", "-d", ":memory:", "-t0", "-g0", "-c1"}, [this] {
    // Ready once -F was traversed and everything it found scanned: the traversal only queues
    // the files, and a request that raced their scan would be answered 404.
    const std::string m = "\n" + RunCommand("curl -s " + url() + "/metrics").out;
    auto has = [&m](const std::string& line) { return m.find("\n" + line + "\n") != std::string::npos; };
    return has("ready 1") && has("thread_work_total{role=\"traverse\"} 1") && has("thread_busy{role=\"traverse\"} 0") &&
           has("thread_busy{role=\"scan\"} 0") && has("thread_work_pending{role=\"scan\"} 0");
  });
}

SlowProxy::SlowProxy(const std::string& script, const std::string& upstream_url, double delay_seconds, bool gated) {
  const std::string ready_file = dir_ / "ready";
  std::vector<std::string> argv = {"python3",      script,
                                   "{port}",       upstream_url.substr(upstream_url.find("://") + 3),
                                   "--delay",      std::to_string(delay_seconds),
                                   "--log",        dir_ / "log",
                                   "--ready-file", ready_file};
  if (gated) {
    argv.push_back("--gate");
    argv.push_back(dir_ / "gate");
  }
  Start(std::move(argv), [ready_file] { return !Slurp(ready_file).empty(); });
}

SlowProxy::~SlowProxy() { Stop(); }

void SlowProxy::OpenGate() { WriteFile(dir_ / "gate", "open\n"); }

namespace {
int CountLines(const std::string& text, const std::string& line) {
  int n = 0;
  for (size_t p = 0; (p = text.find(line + "\n", p)) != std::string::npos; p += line.size() + 1) {
    n += p == 0 || text[p - 1] == '\n';
  }
  return n;
}
}  // namespace

int SlowProxy::requests() const { return CountLines(Slurp(dir_ / "log"), "request"); }
int SlowProxy::released() const { return CountLines(Slurp(dir_ / "log"), "released"); }

std::string ElfBuildIdHex(const std::string& file) {
  CommandResult r = RunCommand("readelf -n '" + file + "' | awk '/Build ID/ {print $3}'");
  return r.out.substr(0, r.out.find('\n'));
}

uint64_t NmValue(const std::string& file, const std::string& symbol) {
  CommandResult r = RunCommand("nm '" + file + "' | awk '$3 == \"" + symbol + "\" {print $1}'");
  return r.out.empty() ? 0 : std::stoull(r.out, nullptr, 16);
}

std::string HexAddress(uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

DirectCall ObjdumpDirectCall(const std::string& file, const std::string& function, const std::string& callee) {
  CommandResult d = RunCommand("objdump -d --no-show-raw-insn --disassemble=" + function + " '" + file + "'");
  DirectCall out;
  if (d.exit_code != 0) return out;
  // "  401136:\tcall   401120 <dup_fn>", then the next instruction's address.
  std::istringstream in(d.out);
  std::string line;
  bool after = false;
  while (std::getline(in, line)) {
    size_t colon = line.find(':');
    if (colon == std::string::npos || line.find('\t') == std::string::npos) continue;
    uint64_t at = 0;
    try {
      at = std::stoull(line.substr(0, colon), nullptr, 16);
    } catch (...) {
      continue;
    }
    if (after) {
      out.return_address = at;
      return out;
    }
    size_t call = line.find("call");
    if (call != std::string::npos && line.find("<" + callee + ">") != std::string::npos) {
      out.callee = std::stoull(line.substr(call + 4), nullptr, 16);
      after = true;
    }
  }
  return DirectCall{};
}

}  // namespace symdex::testing
