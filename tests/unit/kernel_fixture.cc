#include "tests/unit/kernel_fixture.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <sstream>
#include <stdexcept>
#include <vector>

namespace symdex::testing {
namespace {

// Each source marks the line of every function's declaration with /*@name*/.
const std::map<std::string, std::string>& Sources() {
  static const std::map<std::string, std::string> kSources = {
      {"include/linux/common.h",
       "static inline int hdr_helper(int x) /*@hdr_helper*/\n"
       "{\n"
       "\treturn x * 3 + 1;\n"
       "}\n"},
      {"drivers/a/a.c",
       "#include \"../../include/linux/common.h\"\n"
       "int (*a_ptr)(int) = hdr_helper;\n"
       "__attribute__((cold, noinline)) void cold_report(int x);\n"
       "__attribute__((noinline)) static int name_show(int x) /*@name_show*/\n"
       "{\n"
       "\tif (__builtin_expect(x < 0, 0))\n"
       "\t\tcold_report(x);\n"
       "\treturn x + 1;\n"
       "}\n"
       "int a_entry(int x) { return name_show(x) + a_ptr(x) + hdr_helper(x); }\n"},
      {"drivers/b/b.c",
       "#include \"../../include/linux/common.h\"\n"
       "int (*b_ptr)(int) = hdr_helper;\n"
       "\n"
       "__attribute__((noinline)) static int name_show(int x) /*@name_show*/\n"
       "{\n"
       "\treturn x * 2;\n"
       "}\n"
       "int b_entry(int x) { return name_show(x) + b_ptr(x) + hdr_helper(x); }\n"
       "__attribute__((cold, noinline)) void cold_report(int x) { b_ptr = 0; }\n"},
      {"fs/binfmt.c",
       "__attribute__((noinline)) static int load_binary(int x) /*@load_binary*/\n"
       "{\n"
       "\treturn x + 42;\n"
       "}\n"
       "int (*binfmt_ptr)(int) = load_binary;\n"},
      {"fs/compat.c",
       "#define binfmt_ptr compat_binfmt_ptr\n"
       "#include \"binfmt.c\"\n"},
  };
  return kSources;
}

}  // namespace

std::string Toolchain::Name() const {
  std::string n = std::string(cc) + "_dwarf" + std::to_string(dwarf);
  for (char& c : n) c = c == '-' ? '_' : c;
  return n;
}

bool Toolchain::Installed() const { return RunCommand(std::string("command -v ") + cc + " >/dev/null").exit_code == 0; }

KernelFixture::KernelFixture(int dwarf_version, const std::string& cc) {
  // Sources live under a build-prefix-like path, as in a distribution build.
  src = dir / "build/reproducible-path/linux";
  std::string objs;
  for (const auto& [rel, text] : Sources()) WriteFile(src + "/" + rel, text);
  for (const auto& [rel, text] : Sources()) {
    std::istringstream in(text);
    std::string line;
    for (int n = 1; std::getline(in, line); ++n) {
      size_t at = line.find("/*@");
      if (at != std::string::npos) lines[rel][line.substr(at + 3, line.find("*/", at) - at - 3)] = n;
    }
    if (rel.ends_with(".c")) {
      std::string obj = dir / (rel.substr(rel.rfind('/') + 1) + ".o");
      // Compile from the source root with relative paths, as kbuild does.
      MustRun("cd '" + src + "' && " + cc + " -g -gdwarf-" + std::to_string(dwarf_version) + " -O2 -c " + rel +
              " -o '" + obj + "'");
      objs += " '" + obj + "'";
    }
  }
  vmlinux = dir / "vmlinux";
  module = dir / "fake_mod.ko";
  module_stripped = dir / "stripped/fake_mod.ko";
  // -u _etext: ld's default script then defines it (PROVIDE), as the kernel's always does; a
  // System.map without it is refused as truncated.
  MustRun("gcc -no-pie -nostartfiles -Wl,-e,a_entry -Wl,--build-id -Wl,-u,_etext" + objs + " -o '" + vmlinux + "'");
  MustRun("ld -r --build-id" + objs + " -o '" + module + "'");
  // .modinfo name, as kernel modules carry it.
  MustRun("printf 'name=fake_mod\\0' > '" + (dir / "modinfo") + "' && objcopy --add-section .modinfo='" +
          (dir / "modinfo") + "' '" + module + "'");
  MustRun("mkdir -p '" + (dir / "stripped") + "' && objcopy --strip-debug '" + module + "' '" + module_stripped + "'");
}

namespace {

// A note blob as /sys/kernel/notes holds it: the ELF's .note.gnu.build-id section, raw.
void ExtractNotes(const std::string& elf, const std::string& out) {
  CommandResult r = RunCommand("objcopy -O binary --only-section=.note.gnu.build-id '" + elf + "' '" + out + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
}

}  // namespace

void MakeLiveSysroot(const KernelFixture& fx, const std::string& root, const std::string& release, bool with_module) {
  MustRun("rm -rf '" + root + "/sys/module/fake_mod' && mkdir -p '" + root + "/proc/sys/kernel' '" + root +
          "/sys/kernel'");
  CommandResult vm = RunCommand("nm -n --defined-only '" + fx.vmlinux + "'");
  ASSERT_EQ(vm.exit_code, 0) << vm.err;
  std::string extra;
  if (with_module) {
    MustRun("mkdir -p '" + root + "/sys/module/fake_mod/sections' '" + root + "/sys/module/fake_mod/notes'");
    // Module text symbols at load address = section base + offset (nm's sysv format names the section).
    CommandResult nm = RunCommand("nm --format=sysv --defined-only '" + fx.module_stripped + "'");
    ASSERT_EQ(nm.exit_code, 0) << nm.err;
    std::istringstream in(nm.out);
    std::string line;
    auto trim = [](std::string v) {
      v.erase(0, v.find_first_not_of(' '));
      v.erase(v.find_last_not_of(' ') + 1);
      return v;
    };
    while (std::getline(in, line)) {
      std::vector<std::string> f;
      for (size_t p = 0;;) {
        size_t q = line.find('|', p);
        f.push_back(trim(line.substr(p, q == std::string::npos ? std::string::npos : q - p)));
        if (q == std::string::npos) break;
        p = q + 1;
      }
      if (f.size() < 7 || (f[2] != "t" && f[2] != "T")) continue;
      uint64_t base = f[6] == ".text" ? 0xffffffffc0000000ull : f[6] == ".text.unlikely" ? 0xffffffffc0010000ull : 0;
      if (base == 0) continue;
      char buf[256];
      std::snprintf(buf, sizeof buf, "%016llx %s %s\t[fake_mod]\n",
                    static_cast<unsigned long long>(base + std::stoull(f[1], nullptr, 16)), f[2].c_str(), f[0].c_str());
      extra += buf;
    }
    ASSERT_FALSE(extra.empty());
    WriteFile(root + "/sys/module/fake_mod/sections/.text", "0xffffffffc0000000\n");
    WriteFile(root + "/sys/module/fake_mod/sections/.text.unlikely", "0xffffffffc0010000\n");
    ExtractNotes(fx.module, root + "/sys/module/fake_mod/notes/.note.gnu.build-id");
  }
  WriteFile(root + "/proc/kallsyms", vm.out + extra);
  WriteFile(root + "/proc/sys/kernel/osrelease", release + "\n");
  ExtractNotes(fx.vmlinux, root + "/sys/kernel/notes");
  // Last: a daemon tracking this sysroot re-reads the rest when /proc/modules changes, so every
  // other file must be whole by then.
  WriteFile(root + "/proc/modules", with_module ? "fake_mod 16384 0 - Live 0xffffffffc0000000\n" : "");
}

CommandResult IndexLiveSysroot(const KernelFixture& fx, const std::string& symdex_bin, const std::string& root,
                               const std::string& dbg, const std::string& db, const std::string& release) {
  CommandResult layout =
      RunCommand("mkdir -p '" + dbg + "/boot' '" + dbg + "/lib/modules/" + release + "/kernel/drivers' && cp '" +
                 fx.vmlinux + "' '" + dbg + "/boot/vmlinux-" + release + "' && cp '" + fx.module + "' '" + dbg +
                 "/lib/modules/" + release + "/kernel/drivers/fake_mod.ko'");
  if (layout.exit_code != 0) return layout;
  return RunCommand("env -u DEBUGINFOD_URLS -u SYMDEX_DB " + symdex_bin + " --db '" + db + "' index -q --sysroot '" +
                    root + "' --debug-dir '" + dbg + "' --no-debuginfod");
}

}  // namespace symdex::testing
