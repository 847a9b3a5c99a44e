// Hostile ELF files through CodeFile (debuginfo/files/code_file.h), what `symdex callers` and the
// frames' call evidence read code with: opened or refused with a reason, and when opened, every
// direct branch to a few destinations found (a linked file's inside its code) and the call before a
// few places looked for — never a read outside the file. CodeFile maps a path, so each input is written to a memfd and
// opened through /proc/self/fd. Seeds: the relocator's small gcc-built objects for x86-64 and AArch64
// (tests/fuzz/corpus/code_file/).
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "server/debuginfo/files/code_file.h"

using namespace symdex::debuginfo;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const int fd = memfd_create("code_file_fuzz", MFD_CLOEXEC);
  if (fd < 0 || ftruncate(fd, 0) != 0) __builtin_trap();
  for (size_t done = 0; done < size;) {
    const ssize_t w = pwrite(fd, data + done, size - done, static_cast<off_t>(done));
    if (w <= 0) __builtin_trap();
    done += static_cast<size_t>(w);
  }
  auto f = CodeFile::Open("/proc/self/fd/" + std::to_string(fd));
  if (!f.ok()) return 0;
  for (const char* section : {".text", ".text.unlikely", ".init.text"}) {
    for (uint64_t at : {uint64_t{0}, uint64_t{4}, uint64_t{0x10}, uint64_t{0x40}, uint64_t{0x401000}}) {
      // A linked file's branches are at addresses inside its code: reading there works.
      auto branches = (*f)->BranchesTo(section, at);
      if (branches.ok() && !(*f)->relocatable()) {
        for (const Branch& b : *branches) {
          if (!(*f)->Code("", b.at, 1).ok()) __builtin_trap();
        }
      }
      (void)(*f)->CallBefore(section, at + 5);
      (void)(*f)->Code(section, at, 16);
    }
  }
  return 0;
}
