// Helpers for tests: temp directories, writing files, running commands.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

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

// A real debuginfod serving the ELF files of `served_dir` (-F: loose files) on a free loopback
// port, in memory, no rescans; ready() once its first traversal is done (up to 10 s). Stopped
// (SIGTERM, reaped) with the object.
class DebuginfodServer {
 public:
  explicit DebuginfodServer(const std::string& served_dir);
  ~DebuginfodServer();
  DebuginfodServer(const DebuginfodServer&) = delete;
  DebuginfodServer& operator=(const DebuginfodServer&) = delete;
  bool ready() const { return ready_; }
  const std::string& url() const { return url_; }

 private:
  int pid_ = -1;
  bool ready_ = false;
  std::string url_;
};

// A slow network in front of a server: tests/fleet/slow_proxy.py (`script`) forwarding 127.0.0.1
// on a free port to `upstream_url`'s host:port, each answer held `delay_seconds` after its request.
// ready() once it listens; stopped with the object.
class SlowProxy {
 public:
  SlowProxy(const std::string& script, const std::string& upstream_url, double delay_seconds);
  ~SlowProxy();
  SlowProxy(const SlowProxy&) = delete;
  SlowProxy& operator=(const SlowProxy&) = delete;
  bool ready() const { return ready_; }
  const std::string& url() const { return url_; }

 private:
  int pid_ = -1;
  bool ready_ = false;
  std::string url_;
  TempDir dir_;
};

}  // namespace symdex::testing
