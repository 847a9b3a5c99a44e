#include "server/debuginfo/dwarf/source_path.h"

#include <array>
#include <vector>

namespace symdex::debuginfo {
namespace {

constexpr std::array<std::string_view, 22> kTopDirs = {
    "arch", "block", "certs", "crypto", "drivers", "fs",      "include",  "init",  "io_uring", "ipc", "kernel",
    "lib",  "mm",    "net",   "rust",   "samples", "scripts", "security", "sound", "tools",    "usr", "virt"};

bool StartsWithTopDir(std::string_view rest) {
  for (std::string_view d : kTopDirs) {
    if (rest.size() > d.size() && rest.starts_with(d) && rest[d.size()] == '/') return true;
  }
  return false;
}

}  // namespace

std::string NormalizeLexically(std::string_view path) {
  const bool absolute = path.starts_with('/');
  std::vector<std::string_view> parts;
  size_t i = 0;
  while (i <= path.size()) {
    size_t j = path.find('/', i);
    if (j == std::string_view::npos) j = path.size();
    std::string_view part = path.substr(i, j - i);
    if (part.empty() || part == ".") {
      // skip
    } else if (part == "..") {
      if (!parts.empty() && parts.back() != "..")
        parts.pop_back();
      else if (!absolute)
        parts.push_back(part);
    } else {
      parts.push_back(part);
    }
    i = j + 1;
  }
  std::string out = absolute ? "/" : "";
  for (size_t k = 0; k < parts.size(); ++k) {
    if (k) out += '/';
    out += parts[k];
  }
  return out.empty() ? "." : out;
}

std::string JoinPath(std::string_view dir, std::string_view name) {
  if (name.starts_with('/') || dir.empty()) return std::string(name);
  std::string out(dir);
  if (!out.ends_with('/')) out += '/';
  out += name;
  return out;
}

std::string SourceTreeRelative(std::string_view raw, std::string_view comp_dir) {
  std::string path = NormalizeLexically(raw);
  if (!comp_dir.empty()) {
    std::string dir = NormalizeLexically(comp_dir);
    // comp_dir itself, then each ancestor: the longest match wins.
    while (!dir.empty() && dir != "/" && dir != ".") {
      if (path.size() > dir.size() + 1 && path.starts_with(dir) && path[dir.size()] == '/') {
        std::string_view rest = std::string_view(path).substr(dir.size() + 1);
        if (StartsWithTopDir(rest)) return std::string(rest);
      }
      size_t slash = dir.rfind('/');
      if (slash == std::string::npos || slash == 0) break;
      dir.resize(slash);
    }
  }
  if (StartsWithTopDir(path)) return path;
  for (size_t pos = path.find('/'); pos != std::string::npos; pos = path.find('/', pos + 1)) {
    std::string_view rest = std::string_view(path).substr(pos + 1);
    if (StartsWithTopDir(rest)) return std::string(rest);
  }
  return path;
}

}  // namespace symdex::debuginfo
