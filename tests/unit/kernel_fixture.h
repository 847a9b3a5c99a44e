// A miniature "kernel" compiled at test time: duplicate static functions in several files, a
// header static inline emitted out of line in two CUs, a .c file #included into another (the
// compat_binfmt_elf case), a .cold split. Linked as a vmlinux-like executable and, with ld -r,
// as a module-like ET_REL object, both with GNU build-IDs.
#pragma once

#include <map>
#include <string>

#include "tests/unit/test_util.h"

namespace symdex::testing {

// The release string tests give the fixture kernel (its osrelease, the index's target name).
inline constexpr char kFixtureRelease[] = "6.1.0-99-fixture";

// Which compiler and DWARF version a fixture is built with (test parameters).
struct Toolchain {
  int dwarf = 5;
  const char* cc = "gcc";
  std::string Name() const;  // a test name part: gcc_dwarf5, clang_14_dwarf5
  bool Installed() const;    // the compiler is on PATH
};

struct KernelFixture {
  explicit KernelFixture(const Toolchain& t) : KernelFixture(t.dwarf, t.cc) {}
  // `cc`: the compiler of the sources, "gcc" or "clang-14" (clang's DWARF 5 uses the strx / addrx /
  // rnglistx forms and DW_OP_addrx); the link is gcc's and ld's either way.
  explicit KernelFixture(int dwarf_version, const std::string& cc = "gcc");

  TempDir dir;
  std::string src;              // sources
  std::string vmlinux;          // ET_EXEC with DWARF
  std::string module;           // ET_REL with DWARF ("fake_mod")
  std::string module_stripped;  // same, --strip-debug (what a kernel image package ships)
  // Line of each marker comment "/*@NAME*/" in the sources: file -> name -> line.
  std::map<std::string, std::map<std::string, int>> lines;

  int Line(const std::string& file, const std::string& marker) const { return lines.at(file).at(marker); }
};

// A live-host sysroot for the fixture kernel, as `symdex index --sysroot` / `symdexd --sysroot`
// read it: proc/kallsyms (vmlinux at link addresses; with_module: fake_mod's text at .text
// 0xffffffffc0000000 and .text.unlikely 0xffffffffc0010000), proc/modules, osrelease,
// sys/kernel/notes, sys/module/fake_mod/{sections,notes}. Calling it again rewrites the
// sysroot, so a test can load and unload the module.
void MakeLiveSysroot(const KernelFixture& fx, const std::string& root, const std::string& release, bool with_module);

// The fixture's debug files laid out under `dbg` as /usr/lib/debug is (boot/vmlinux-R,
// lib/modules/R/kernel/drivers/fake_mod.ko), then `symdex_bin --db DB index` of the live sysroot
// `root` with them. Returns the CLI's result.
CommandResult IndexLiveSysroot(const KernelFixture& fx, const std::string& symdex_bin, const std::string& root,
                               const std::string& dbg, const std::string& db, const std::string& release);

}  // namespace symdex::testing
