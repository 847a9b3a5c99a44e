#include "server/store/open_index.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/core.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>

#include "server/common/file_util.h"
#include "server/common/strings.h"
#include "server/debuginfo/symbolize/addr_map.h"
#include "server/store/migrations.h"
#include "server/store/text_symbol_file.h"

namespace symdex::store {
namespace {

// Is `dir` one that exists only to hold symdex's index (so its mode is ours to set)? The
// default locations are; the directory of an index a user put elsewhere with --db (their home,
// /tmp) is not.
bool IsIndexOnlyDir(const std::filesystem::path& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path abs = fs::absolute(dir, ec).lexically_normal();
  if (ec) return false;
  for (const fs::path& known : {fs::path("/var/lib/symdex"), fs::path(DefaultIndexPath()).parent_path()}) {
    if (abs == known.lexically_normal()) return true;
  }
  return false;
}

// The index and everything next to it that shows live addresses (SQLite's -wal/-shm/-journal,
// the address maps): for the owner and the `symdex` group only (file_util.h). Over-readable
// files made by an older symdex or under a lax umask are fixed when they are ours, with one
// line on stderr each; a file we cannot fix is refused with the chmod that fixes it.
absl::Status EnsureIndexPrivate(const std::string& path) {
  namespace fs = std::filesystem;
  std::vector<std::string> paths = {path, path + "-wal", path + "-shm", path + "-journal"};
  fs::path parent = fs::path(path).parent_path();
  if (!parent.empty() && IsIndexOnlyDir(parent)) paths.push_back(parent.string());
  if (const std::string maps = AddrMapDirFor(path); !maps.empty()) {
    paths.push_back(maps);
    std::unique_ptr<DIR, int (*)(DIR*)> d(::opendir(maps.c_str()), ::closedir);
    while (d) {
      dirent* e = ::readdir(d.get());
      if (e == nullptr) break;
      std::string_view name = e->d_name;
      if (name != "." && name != "..") paths.push_back(StrCat(maps, "/", name));
    }
  }
  for (const std::string& p : paths) {
    ASSIGN_OR_RETURN(std::string notice, EnsurePrivate(p));
    if (!notice.empty()) fmt::print(stderr, "symdex: {}\n", notice);
  }
  return absl::OkStatus();
}

bool IsPlainPath(const std::string& path) { return !path.empty() && path != ":memory:" && !path.starts_with("file:"); }

// Read-only, or created and migrated: what every use below starts from.
absl::StatusOr<Db> OpenWithMode(const std::string& path, Db::Mode mode) {
  namespace fs = std::filesystem;
  if (mode == Db::Mode::kReadOnly) {
    std::error_code ec;
    if (!fs::exists(path, ec)) {
      return absl::NotFoundError(StrCat("no index at ", path, ": run 'symdex index' first"));
    }
    if (IsPlainPath(path)) RETURN_IF_ERROR(EnsureIndexPrivate(path));
    ASSIGN_OR_RETURN(Db db, Db::Open(path, mode));
    ASSIGN_OR_RETURN(int64_t v, db.UserVersion());
    if (v != Migrations().back().version) {
      return absl::FailedPreconditionError(
          StrCat(path, " has schema version ", v, ", this symdex expects ", Migrations().back().version,
                 ": open it once with write access (any 'symdex index') to migrate it"));
    }
    return db;
  }
  if (IsPlainPath(path)) {
    fs::path parent = fs::path(path).parent_path();
    if (absl::Status made = CreatePrivateDir(parent.string()); !made.ok()) {
      return absl::FailedPreconditionError(StrCat(made.message(), " (use --db PATH)"));
    }
    // Created 0640 before SQLite sees it (SQLite would make it 0644 & ~umask); SQLite gives
    // the -wal and -shm files the database file's mode and owner.
    std::error_code ec;
    if (!fs::exists(path, ec)) {
      auto created = OpenPrivateFile(path, O_RDWR | O_EXCL);
      if (!created.ok() && !fs::exists(path, ec)) {  // (exists: another writer won the race)
        return absl::FailedPreconditionError(StrCat(created.status().message(), " (use --db PATH)"));
      }
    }
    RETURN_IF_ERROR(EnsureIndexPrivate(path));
  }
  ASSIGN_OR_RETURN(Db db, Db::Open(path, mode));
  RETURN_IF_ERROR(Migrate(db, Migrations()));
  return db;
}

// The checks of an index a user asks questions of, each saying the cure.
absl::Status CheckReadable(const std::string& path) {
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
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Db> OpenIndex(const std::string& path, IndexUse use) {
  switch (use) {
    case IndexUse::kRead:
      return OpenWithMode(path, Db::Mode::kReadOnly);
    case IndexUse::kAsk: {
      RETURN_IF_ERROR(CheckReadable(path));
      // Read-only: the connection that answers. (A read-write one closing last would checkpoint
      // and remove -wal/-shm, which a reader without write access to the directory needs.)
      absl::StatusOr<Db> db = OpenWithMode(path, Db::Mode::kReadOnly);
      if (db.ok() || db.status().code() != absl::StatusCode::kFailedPrecondition || ::access(path.c_str(), W_OK) != 0) {
        return db;
      }
      // An index written by an older symdex, which this user may write: migrated in place first.
      RETURN_IF_ERROR(OpenWithMode(path, Db::Mode::kReadWriteCreate).status());
      return OpenWithMode(path, Db::Mode::kReadOnly);
    }
    case IndexUse::kCreate:
      return OpenWithMode(path, Db::Mode::kReadWriteCreate);
    case IndexUse::kWrite: {
      ASSIGN_OR_RETURN(Db db, OpenWithMode(path, Db::Mode::kReadWriteCreate));
      if (const std::string dir = AddrMapDirFor(path); !dir.empty()) {
        debuginfo::RemoveStaleAddrMapTempFiles(dir);
        RemoveStaleTempFiles(dir, kTextSymbolTempMarker);
      }
      return db;
    }
  }
  return absl::InvalidArgumentError("unknown use of the index");
}

}  // namespace symdex::store
