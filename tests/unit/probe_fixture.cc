#include "tests/unit/probe_fixture.h"

#include <stdexcept>

namespace symdex::testing {
namespace {

constexpr char kTraced[] = R"(__attribute__((noinline)) static int dup_fn(int x) { return x + 1; }
__attribute__((noinline, no_instrument_function)) int quiet_fn(int x) { return x * 5; }
__attribute__((noinline)) int blocked_fn(int x) { return x - 3; }
static unsigned long __attribute__((used, section("_kprobe_blacklist"))) _kbl_addr_blocked_fn =
    (unsigned long)blocked_fn;
__attribute__((noinline, section(".init.text"))) int boot_fn(int x) { return x ^ 7; }
__attribute__((noinline, section(".noinstr.text"), no_instrument_function)) int raw_fn(int x) { return x | 9; }
int traced_entry(int x) { return dup_fn(x) + quiet_fn(x) + blocked_fn(x) + boot_fn(x) + raw_fn(x); }
)";

constexpr char kUntraced[] = R"(__attribute__((noinline)) static int dup_fn(int x) { return x * 7; }
int untraced_entry(int x) { return dup_fn(x); }
void __fentry__(void) {}
)";

// Region labels around the linker's concatenation of .init.text / .noinstr.text (first and
// last object), as the kernel's linker script puts them; _text at the start of .text (start.o is
// linked first), what KASLR offsets are relative to.
constexpr char kStart[] =
    ".section .text,\"ax\",@progbits\n.globl _text\n_text:\n"
    ".section .init.text,\"ax\",@progbits\n.globl _sinittext\n_sinittext:\n"
    ".section .noinstr.text,\"ax\",@progbits\n.globl __noinstr_text_start\n__noinstr_text_start:\n"
    ".section .note.GNU-stack,\"\",@progbits\n";
constexpr char kEnd[] =
    ".section .init.text,\"ax\",@progbits\n.globl _einittext\n_einittext:\n"
    ".section .noinstr.text,\"ax\",@progbits\n.globl __noinstr_text_end\n__noinstr_text_end:\n"
    ".section .note.GNU-stack,\"\",@progbits\n";

}  // namespace

ProbeFixture::ProbeFixture() {
  const std::string src = dir / "src";
  WriteFile(src + "/kernel/traced.c", kTraced);
  WriteFile(src + "/kernel/trace/untraced.c", kUntraced);
  WriteFile(src + "/start.s", kStart);
  WriteFile(src + "/end.s", kEnd);
  MustRun(
      "cd '" + src + "' && gcc -g -O2 -pg -mfentry -mrecord-mcount -c kernel/traced.c -o traced.o" +
      " && gcc -g -O2 -c kernel/trace/untraced.c -o untraced.o && gcc -c start.s -o start.o && gcc -c end.s -o end.o");
  vmlinux = dir / "vmlinux";
  MustRun("cd '" + src + "' && gcc -no-pie -nostartfiles -Wl,-e,traced_entry -Wl,--build-id -Wl,-u,_etext " +
          "start.o traced.o untraced.o end.o " +
          "-Wl,--defsym=__start_mcount_loc=__start___mcount_loc -Wl,--defsym=__stop_mcount_loc=__stop___mcount_loc " +
          "-Wl,--defsym=__start_kprobe_blacklist=__start__kprobe_blacklist " +
          "-Wl,--defsym=__stop_kprobe_blacklist=__stop__kprobe_blacklist -o '" + vmlinux + "'");
  modules_dir = dir / ("lib/modules/" + release);
  module = modules_dir + "/kernel/probe_mod.ko";
  MustRun("mkdir -p '" + modules_dir + "/kernel' && cd '" + src + "' && ld -r --build-id traced.o untraced.o -o '" +
          module + "' && printf 'name=probe_mod\\0' > modinfo && objcopy --add-section .modinfo=modinfo '" + module +
          "'");
  system_map = dir / ("boot/System.map-" + release);
  MustRun("mkdir -p '" + (dir / "boot") + "' && nm -n '" + vmlinux + "' | grep -v ' [Uw] ' > '" + system_map + "'");
  debug_dir = dir / "debug";
  MustRun("mkdir -p '" + debug_dir + "/boot' '" + debug_dir + "/lib/modules/" + release + "/kernel' && cp '" + vmlinux +
          "' '" + debug_dir + "/boot/vmlinux-" + release + "' && cp '" + module + "' '" + debug_dir + "/lib/modules/" +
          release + "/kernel/'");
}

}  // namespace symdex::testing
