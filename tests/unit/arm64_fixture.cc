#include "tests/unit/arm64_fixture.h"

#include <stdexcept>

namespace symdex::testing {
namespace {

constexpr char kA64Traced[] = R"(__attribute__((noinline)) static int dup_fn(int x) { return x + 1; }
__attribute__((noinline, patchable_function_entry(0, 0))) int quiet_fn(int x) { return x * 5; }
__attribute__((noinline)) int blocked_fn(int x) { return x - 3; }
static unsigned long __attribute__((used, section("_kprobe_blacklist"))) _kbl_addr_blocked_fn =
    (unsigned long)blocked_fn;
__attribute__((noinline, section(".init.text"))) int boot_fn(int x) { return x ^ 7; }
__attribute__((noinline, section(".idmap.text"))) int idmap_fn(int x) { return x | 9; }
int traced_entry(int x) { return dup_fn(x) + quiet_fn(x) + blocked_fn(x) + boot_fn(x) + idmap_fn(x); }
)";

constexpr char kA64Untraced[] = R"(__attribute__((noinline)) static int dup_fn(int x) { return x * 7; }
int untraced_entry(int x) { return dup_fn(x); }
)";

// _text, then _stext 64 bytes on (arm64: the image header before the text); the region labels
// around .init.text and .idmap.text (first and last object, as the kernel's linker script).
constexpr char kA64Start[] =
    ".section .text,\"ax\",@progbits\n.globl _text\n_text:\n.space 64\n.globl _stext\n_stext:\n"
    ".section .init.text,\"ax\",@progbits\n.globl _sinittext\n_sinittext:\n"
    ".section .idmap.text,\"ax\",@progbits\n.globl __idmap_text_start\n__idmap_text_start:\n";
constexpr char kA64End[] =
    ".section .init.text,\"ax\",@progbits\n.globl _einittext\n_einittext:\n"
    ".section .idmap.text,\"ax\",@progbits\n.globl __idmap_text_end\n__idmap_text_end:\n"
    ".section .text,\"ax\",@progbits\n.globl _etext\n_etext:\n.globl _end\n_end:\n";

}  // namespace

Arm64Fixture::Arm64Fixture(const std::string& patchable) {
  const std::string src = dir / "src";
  WriteFile(src + "/kernel/traced.c", kA64Traced);
  WriteFile(src + "/kernel/trace/untraced.c", kA64Untraced);
  WriteFile(src + "/start.s", kA64Start);
  WriteFile(src + "/end.s", kA64End);
  const std::string cc = "aarch64-linux-gnu-gcc -g -O2 -mbranch-protection=pac-ret ";
  const std::string ftrace = "-fpatchable-function-entry=" + patchable +
                             (patchable.find(',') != std::string::npos ? " -falign-functions=8 " : " ");
  MustRun("cd '" + src + "' && " + cc + ftrace + "-c kernel/traced.c -o traced.o && " + cc +
          "-c kernel/trace/untraced.c -o untraced.o && aarch64-linux-gnu-gcc -c start.s -o start.o && "
          "aarch64-linux-gnu-gcc -c end.s -o end.o");
  vmlinux = dir / "vmlinux";
  MustRun("cd '" + src +
          "' && aarch64-linux-gnu-ld -shared -Bsymbolic -z notext --no-apply-dynamic-relocs --build-id "
          "-Ttext-segment=0xffff800008000000 -e traced_entry start.o traced.o untraced.o end.o "
          "--defsym=__start_mcount_loc=__start___patchable_function_entries "
          "--defsym=__stop_mcount_loc=__stop___patchable_function_entries "
          "--defsym=__start_kprobe_blacklist=__start__kprobe_blacklist "
          "--defsym=__stop_kprobe_blacklist=__stop__kprobe_blacklist -o '" +
          vmlinux + "'");
  modules_dir = dir / ("lib/modules/" + release);
  module = modules_dir + "/kernel/arm64_mod.ko";
  MustRun("mkdir -p '" + modules_dir + "/kernel' && cd '" + src + "' && aarch64-linux-gnu-ld -r --build-id " +
          "traced.o untraced.o -o '" + module + "' && printf 'name=arm64_mod\\0' > modinfo && " +
          "aarch64-linux-gnu-objcopy --add-section .modinfo=modinfo '" + module + "'");
  // scripts/mksysmap: nm -n less types a N U w, mapping symbols ($x, $d) and local labels (.L).
  system_map = dir / ("boot/System.map-" + release);
  MustRun("mkdir -p '" + (dir / "boot") + "' && aarch64-linux-gnu-nm -n '" + vmlinux +
          "' | grep -v -e ' [aNUw] ' -e ' \\$' -e ' \\.L' > '" + system_map + "'");
  debug_dir = dir / "debug";
  MustRun("mkdir -p '" + debug_dir + "/boot' '" + debug_dir + "/lib/modules/" + release + "/kernel' && cp '" + vmlinux +
          "' '" + debug_dir + "/boot/vmlinux-" + release + "' && cp '" + module + "' '" + debug_dir + "/lib/modules/" +
          release + "/kernel/'");
  // The BL in traced_entry that calls traced.c's dup_fn (the only dup_fn before it), from the
  // disassembly: its return address as an offset into traced_entry.
  CommandResult d =
      RunCommand("aarch64-linux-gnu-objdump -d --no-show-raw-insn '" + vmlinux +
                 "' | awk '/<traced_entry>:/{f=1; next} f && /^$/{f=0} f && /bl\\t.*<dup_fn>/{print $1}'");
  CommandResult base = RunCommand("aarch64-linux-gnu-nm '" + vmlinux + "' | awk '$3==\"traced_entry\"{print $1}'");
  if (d.exit_code != 0 || base.exit_code != 0 || d.out.empty() || base.out.empty()) {
    throw std::runtime_error("no call of dup_fn in traced_entry: " + d.out + d.err + base.err);
  }
  const uint64_t bl = std::stoull(d.out.substr(0, d.out.find(':')), nullptr, 16);
  traced_entry_ret = bl + 4 - std::stoull(base.out, nullptr, 16);
}

}  // namespace symdex::testing
