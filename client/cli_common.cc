#include "client/cli_common.h"
#include "server/common/strings.h"

#include <fmt/core.h>
#include <unistd.h>

#include <cstdlib>
#include <ctime>

#include "server/store/migrations.h"

namespace symdex::cli {

std::string DbPath(const GlobalOptions& g) {
  if (!g.db.empty()) return g.db;
  if (const char* env = std::getenv("SYMDEX_DB"); env && *env) return env;
  if (::geteuid() == 0) return "/var/lib/symdex/index.db";
  if (const char* x = std::getenv("XDG_STATE_HOME"); x && *x) return std::string(x) + "/symdex/index.db";
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : ".") + "/.local/state/symdex/index.db";
}

int Fail(const GlobalOptions& g, const absl::Status& s, bool input_error) {
  int code = !input_error && s.code() == absl::StatusCode::kInvalidArgument ? kAmbiguous : kEnvError;
  if (g.json) {
    PrintJson({{"error", {{"code", absl::StatusCodeToString(s.code())}, {"message", std::string(s.message())}}}});
  } else {
    fmt::print(stderr, "symdex: {}\n", s.message());
  }
  return code;
}

absl::StatusOr<store::Db> OpenForRead(const GlobalOptions& g) {
  // Read-write when possible so that an index written by an older symdex is migrated in place;
  // read-only (no migration) when this user may not write it.
  std::string path = DbPath(g);
  if (::access(path.c_str(), F_OK) != 0) {
    return absl::FailedPreconditionError("no index at " + path + ": run 'symdex index' first (or pass --db)");
  }
  if (::access(path.c_str(), W_OK) == 0) return store::OpenIndex(path, store::Db::Mode::kReadWriteCreate);
  return store::OpenIndex(path, store::Db::Mode::kReadOnly);
}

absl::StatusOr<store::Db> OpenForWrite(const GlobalOptions& g) {
  return store::OpenIndex(DbPath(g), store::Db::Mode::kReadWriteCreate);
}

void PrintJson(const nlohmann::json& j) { fmt::print("{}\n", j.dump(2)); }

std::string Hex(uint64_t v) { return fmt::format("{:016x}", v); }

std::string FormatTime(int64_t unix) {
  std::time_t t = static_cast<std::time_t>(unix);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

}  // namespace symdex::cli
