#include "tests/unit/kernel_fixture.h"

#include <sstream>
#include <stdexcept>

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

void Must(const std::string& cmd) {
  CommandResult r = RunCommand(cmd);
  if (r.exit_code != 0) throw std::runtime_error(cmd + " failed: " + r.err);
}

}  // namespace

KernelFixture::KernelFixture(int dwarf_version) {
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
      Must("cd '" + src + "' && gcc -g -gdwarf-" + std::to_string(dwarf_version) + " -O2 -c " + rel + " -o '" + obj + "'");
      objs += " '" + obj + "'";
    }
  }
  vmlinux = dir / "vmlinux";
  module = dir / "fake_mod.ko";
  module_stripped = dir / "stripped/fake_mod.ko";
  Must("gcc -no-pie -nostartfiles -Wl,-e,a_entry -Wl,--build-id" + objs + " -o '" + vmlinux + "'");
  Must("ld -r --build-id" + objs + " -o '" + module + "'");
  // .modinfo name, as kernel modules carry it.
  Must("printf 'name=fake_mod\\0' > '" + (dir / "modinfo") + "' && objcopy --add-section .modinfo='" + (dir / "modinfo") +
       "' '" + module + "'");
  Must("mkdir -p '" + (dir / "stripped") + "' && objcopy --strip-debug '" + module + "' '" + module_stripped + "'");
}

}  // namespace symdex::testing
