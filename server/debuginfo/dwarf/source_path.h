// Turns the paths DWARF holds into the source-tree-relative paths people use
// ("drivers/pnp/card.c"), whatever the build prefix:
//   /build/reproducible-path/linux-6.1.192/arch/x86/kernel/head_64.S   (absolute srctree)
//   debian/build/build_amd64_none_cloud-amd64/arch/x86/events/amd/core.c (comp_dir-relative objtree)
//   /usr/src/linux/include/linux/kobject.h
// Rule: lexically normalise; then strip the longest of {comp_dir and each of its ancestors}
// that prefixes the path and leaves a remainder starting with a kernel top-level directory
// (arch/, drivers/, include/, ...). Failing that, cut at the first "/<top-level dir>/"
// component. Otherwise the path is returned normalised but unchanged.
#pragma once

#include <string>
#include <string_view>

namespace symdex::debuginfo {

// "a/./b/../c" -> "a/c"; keeps a leading "/" and leading ".." components.
std::string NormalizeLexically(std::string_view path);

// Joins `name` to `dir` unless it is absolute.
std::string JoinPath(std::string_view dir, std::string_view name);

std::string SourceTreeRelative(std::string_view path, std::string_view comp_dir);

}  // namespace symdex::debuginfo
