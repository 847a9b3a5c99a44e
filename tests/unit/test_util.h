// Helpers for tests: temp directories, writing files, running commands.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace symdex::testing {

// A fresh directory under $TMPDIR, removed (recursively) on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& rel) const { return path_ + "/" + rel; }

 private:
  std::string path_;
};

// Writes `content` to `path`, creating parent directories.
void WriteFile(const std::string& path, const std::string& content);
// The whole file (tests only: unbounded), "" when it cannot be read.
std::string Slurp(const std::string& path);

struct CommandResult {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};
// Runs `cmd` through /bin/sh, capturing stdout and stderr separately.
CommandResult RunCommand(const std::string& cmd);
// RunCommand that throws std::runtime_error (the command and its stderr) unless it exits 0.
void MustRun(const std::string& cmd);

// A file of the fetched Debian -dbg corpus (tests/corpus/fetch-debian-kernel.sh dbg), by its path
// inside the package (e.g. "usr/lib/debug/boot/vmlinux-6.1.0-57-cloud-amd64"); "" when absent.
std::string DebianDbgCorpusFile(const std::string& rel);

// One ELF note (namesz, descsz, type, padded name, padded desc), host byte order: the layout
// of /sys/kernel/notes and .note.gnu.build-id.
std::string ElfNote(uint32_t type, std::string_view name, std::string_view desc);

// Compiles C source to an object file with gcc (what kernel modules are: ET_REL).
void CompileObject(const std::string& c_source, const std::string& out_path, const std::string& flags = "-O2");

// A TCP port on 127.0.0.1 that was free a moment ago (bind to port 0, read it back, close).
int FreeTcpPort();

// What binutils say of an ELF file, as independent witnesses for answers under test: its GNU
// build-ID (readelf -n, "" when none), a symbol's st_value (nm; 0 when absent: a test then
// fails on the answer), and an address as "0x…".
std::string ElfBuildIdHex(const std::string& file);
uint64_t NmValue(const std::string& file, const std::string& symbol);
std::string HexAddress(uint64_t v);
// objdump's word on the direct call from `function` to `callee` in `file`: the callee's address
// and the return address (the next instruction's). {0, 0} when objdump shows no such call.
struct DirectCall {
  uint64_t callee = 0, return_address = 0;
};
DirectCall ObjdumpDirectCall(const std::string& file, const std::string& function, const std::string& callee);

// A server process on a free loopback port for a test: started in its own process group by the
// subclass (Start), ready() once its `is_ready` check passed (polled for up to 120 s: a loaded
// or sanitized machine starts servers slowly; a server that exits is not waited for), stopped
// (SIGTERM, reaped) with the object.
class LoopbackServer {
 public:
  ~LoopbackServer();
  LoopbackServer(const LoopbackServer&) = delete;
  LoopbackServer& operator=(const LoopbackServer&) = delete;
  bool ready() const { return ready_; }
  const std::string& url() const { return url_; }  // http://127.0.0.1:PORT

 protected:
  LoopbackServer() = default;
  // Runs `argv` (PATH lookup) with "{port}" in any argument replaced by the port, then polls
  // `is_ready` every 100 ms until it passes, the process exits, or 120 s have gone by.
  void Start(std::vector<std::string> argv, const std::function<bool()>& is_ready);
  // SIGTERM, reaped; for a subclass whose members the server uses (they go before the base).
  void Stop();

 private:
  int pid_ = -1;
  bool ready_ = false;
  std::string url_;
};

// A real debuginfod serving the ELF files of `served_dir` (-F: loose files), in memory, no
// rescans; ready once its first traversal is done.
class DebuginfodServer : public LoopbackServer {
 public:
  explicit DebuginfodServer(const std::string& served_dir);
};

// A slow network in front of a server: tests/fleet/slow_proxy.py (`script`) forwarding to
// `upstream_url`'s host:port, each answer held `delay_seconds` after its request and, when
// `gated`, until OpenGate() (at most 600 s), so that a test ends the slow transfer when it has
// seen what it needs rather than guessing how long its own steps take. Ready once it listens.
class SlowProxy : public LoopbackServer {
 public:
  SlowProxy(const std::string& script, const std::string& upstream_url, double delay_seconds, bool gated = false);
  ~SlowProxy();  // stops the proxy before its directory (gate, log) is removed
  // Lets the held answers (and every later one) go. Idempotent.
  void OpenGate();
  // Requests forwarded to the upstream so far, and answers let go so far (from the proxy's log).
  int requests() const;
  int released() const;

 private:
  TempDir dir_;
};

}  // namespace symdex::testing
