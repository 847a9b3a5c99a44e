#include "client/cli_common.h"

#include <fmt/core.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include "server/api/remote_query.h"
#include "server/common/file_util.h"
#include "server/common/strings.h"
#include "server/debuginfo/addr_map.h"
#include "server/store/debuginfo_store.h"
#include "server/store/migrations.h"

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
    fmt::print(stderr, "symdex: {}\n", s.message());
  }
  return code;
}

absl::StatusOr<store::Db> OpenForRead(const GlobalOptions& g) {
  // Read-write when possible so that an index written by an older symdex is migrated in place;
  // read-only (no migration) when this user may not write it.
  std::string path = DbPath(g);
  if (::access(path.c_str(), F_OK) != 0) {
    if (errno == EACCES) {
      // The index is private (0640 in a 0750 directory): readers need its group.
      return absl::PermissionDeniedError(StrCat("cannot read the index at ", path, ": ", std::strerror(errno),
                                                " (it is for its owner and the 'symdex' group)"));
    }
    return absl::FailedPreconditionError("no index at " + path + ": run 'symdex index' first (or pass --db)");
  }
  if (::access(path.c_str(), R_OK) != 0) {
    return absl::PermissionDeniedError(StrCat("cannot read the index at ", path, ": ", std::strerror(errno),
                                              " (it is for its owner and the 'symdex' group)"));
  }
  if (::access(path.c_str(), W_OK) == 0) return store::OpenIndex(path, store::Db::Mode::kReadWriteCreate);
  return store::OpenIndex(path, store::Db::Mode::kReadOnly);
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
    ASSIGN_OR_RETURN(auto r, api::RemoteQuery::Connect(c));
    return std::unique_ptr<query::QueryApi>(std::move(r));
  }
  {
    // Checks the file exists and migrates an index written by an older symdex (when writable).
    ASSIGN_OR_RETURN(auto db, OpenForRead(g));
  }
  // One process, one question (or one stream of addresses): per-generation tables are worth
  // keeping across its calls, answers are not.
  ASSIGN_OR_RETURN(auto q, query::LocalQuery::Open(DbPath(g), query::LocalQuery::Options{.max_cached_addresses = 0}));
  return std::unique_ptr<query::QueryApi>(std::move(q));
}

absl::StatusOr<store::Db> OpenForWrite(const GlobalOptions& g) {
  ASSIGN_OR_RETURN(auto db, store::OpenIndex(DbPath(g), store::Db::Mode::kReadWriteCreate));
  // The writer cleans up after writers killed mid-way (a temporary address map is as private
  // as a finished one, but would otherwise stay forever).
  if (const std::string dir = AddrMapDirFor(DbPath(g)); !dir.empty()) debuginfo::RemoveStaleAddrMapTempFiles(dir);
  return db;
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

absl::StatusOr<AddrMapState> VmlinuxAddrMap(const GlobalOptions& g, store::Db& db, const store::TargetInfo& t) {
  ASSIGN_OR_RETURN(auto vml, store::DebugFileOf(db, t.id, ""));
  const std::string dir = AddrMapDirFor(DbPath(g));
  if (!vml || vml->relocatable || dir.empty()) return AddrMapState{};
  AddrMapState out;
  out.path = debuginfo::AddrMapPath(dir, vml->build_id);
  auto m = debuginfo::MappedAddrMap::Open(out.path, vml->build_id);
  if (m.ok()) {
    out.status = "present";
    out.detail = fmt::format("{} MB", ((*m)->map().size_bytes() + (1 << 19)) >> 20);
  } else {
    out.status = m.status().code() == absl::StatusCode::kNotFound ? "missing" : "invalid";
    out.detail = std::string(m.status().message());
  }
  return out;
}

}  // namespace symdex::cli
