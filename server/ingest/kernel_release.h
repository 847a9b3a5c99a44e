// A kernel's release ("6.1.0-57-cloud-amd64", what `uname -r` prints) from what its files say
// about themselves, rather than from where they lie: a module's .modinfo "vermagic=" and
// vmlinux's linux_banner. Offline indexing uses these before any guess from file names, so a
// renamed or symlinked layout still finds its debug files.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/common/status.h"

typedef struct Elf Elf;

namespace symdex::ingest {

// The release a vermagic names: its first word ("6.1.0-57-cloud-amd64 SMP mod_unload
// modversions " -> "6.1.0-57-cloud-amd64"); "" when it does not look like one.
std::string ReleaseFromVermagic(std::string_view vermagic);

// The release in a linux_banner ("Linux version 6.1.0-57-cloud-amd64 (debian-kernel@...) ..."
// -> "6.1.0-57-cloud-amd64"); "" when it is not a banner.
std::string ReleaseFromBanner(std::string_view banner);

// The value of `key` in a .modinfo section (NUL-separated "key=value" strings); "" if absent.
std::string ModinfoValue(std::string_view modinfo, std::string_view key);

// The release most of `releases` name (empty ones ignored), and how many named each: modules
// of one kernel agree, so a disagreement means a mixed-up directory the user should hear of.
struct ReleaseVote {
  std::string release;  // the majority; ties go to the smallest name, so the answer is stable
  size_t votes = 0;     // for `release`
  std::map<std::string, size_t> counts;
};
ReleaseVote MajorityRelease(const std::vector<std::string>& releases);

// The text of vmlinux's linux_banner (up to its NUL, at most 1 KiB) from an ELF's symbol table
// and the section holding it; nullopt when the ELF has no such symbol or its bytes are not in
// the file (a stripped or NOBITS section).
absl::StatusOr<std::optional<std::string>> LinuxBannerOf(Elf* elf);

}  // namespace symdex::ingest
