#include "server/kernel/vmlinux_release.h"

#include <fcntl.h>
#include <libelf.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "server/common/elf_handle.h"
#include "server/common/strings.h"
#include "server/common/unique_fd.h"
#include "server/ingest/kernel_release.h"

namespace symdex::kernel {

absl::StatusOr<std::string> VmlinuxRelease(const std::string& path) {
  InitLibelf();
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return absl::NotFoundError(StrCat("cannot open ", path, ": ", std::strerror(errno)));
  ElfPtr elf(elf_begin(fd.get(), ELF_C_READ_MMAP, nullptr));
  if (!elf || elf_kind(elf.get()) != ELF_K_ELF) return absl::InvalidArgumentError(StrCat(path, ": not an ELF file"));
  auto banner = ingest::LinuxBannerOf(elf.get());
  if (!banner.ok()) return absl::InvalidArgumentError(StrCat(path, ": ", banner.status().message()));
  return *banner ? ingest::ReleaseFromBanner(**banner) : std::string();
}

}  // namespace symdex::kernel
