#include "server/jit/jitted_dso_files.h"

#include <algorithm>
#include <filesystem>
#include <set>

#include "server/common/file_util.h"
#include "server/common/strings.h"

namespace symdex::jit {

namespace fs = std::filesystem;
using ingest::LooksLikeJittedDso;

absl::StatusOr<JittedDso> ReadJittedDso(const std::string& path, size_t max_bytes) {
  std::error_code ec;
  auto st = fs::status(path, ec);
  if (!ec && fs::exists(st) && !fs::is_regular_file(st)) {
    return absl::InvalidArgumentError(StrCat(path, ": not a regular file"));
  }
  auto bytes = ReadFileBounded(path, max_bytes);
  if (!bytes.ok()) {
    if (absl::IsResourceExhausted(bytes.status())) {
      return absl::ResourceExhaustedError(
          StrCat(path, ": larger than ", max_bytes >> 20, " MiB: not a jitted DSO (they hold one function)"));
    }
    return bytes.status();
  }
  return ingest::ParseJittedDso(*bytes, path);
}

JittedDsoScan ExpandJittedDsoPaths(const std::vector<std::string>& paths) {
  JittedDsoScan out;
  std::set<std::string> seen;
  auto add = [&](std::vector<std::string> found) {
    std::sort(found.begin(), found.end());
    for (auto& f : found) {
      if (seen.insert(f).second) out.files.push_back(std::move(f));
    }
  };
  // Regular files named jitted-*.so directly in `dir`; subdirectories into `subdirs` when asked.
  auto list = [&](const std::string& dir, std::vector<std::string>& found, std::vector<std::string>* subdirs) {
    std::error_code ec;
    fs::directory_iterator it(dir, ec), end;
    for (; !ec && it != end; it.increment(ec)) {
      std::error_code ec2;
      const std::string name = it->path().filename().string();
      if (subdirs && it->is_directory(ec2)) {
        subdirs->push_back(it->path().string());
      } else if (LooksLikeJittedDso(name) && it->is_regular_file(ec2)) {
        found.push_back(it->path().string());
      }
    }
    if (ec) out.errors.push_back(absl::PermissionDeniedError(StrCat(dir, ": cannot list: ", ec.message())));
  };
  for (const std::string& p : paths) {
    std::error_code ec;
    auto st = fs::status(p, ec);
    if (ec || !fs::exists(st)) {
      out.errors.push_back(absl::NotFoundError(StrCat(p, ": no such file or directory")));
      continue;
    }
    if (!fs::is_directory(st)) {
      add({p});
      continue;
    }
    std::vector<std::string> found, subdirs;
    list(p, found, &subdirs);
    std::sort(subdirs.begin(), subdirs.end());
    for (const std::string& d : subdirs) list(d, found, nullptr);
    add(std::move(found));
  }
  return out;
}

}  // namespace symdex::jit
