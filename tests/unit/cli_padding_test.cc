// What newer x86-64 kernels put at a function's entry, on small linked "kernels" built here.
// Function padding (objtool's __pfx_NAME before each function since 6.2): an address in it
// answers with the symbol and says it is padding, with no source line — the line table's row
// there is the end of the function before, which the padding is not part of. IBT's ENDBR64
// (Debian's 6.12): the fentry call is 4 bytes in, and a probe at the entry lands there.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/unit/test_util.h"

namespace symdex {
namespace {

using nlohmann::json;
using testing::CommandResult;
using testing::RunCommand;

// symdex over the index in `dir`.
CommandResult Symdex(const testing::TempDir& dir, const std::string& args) {
  return RunCommand("env -u DEBUGINFOD_URLS " + std::string(SYMDEX_BIN) + " --db '" + (dir / "index.db") + "' " + args);
}

// Indexes `vmlinux` by its build-ID from a debug directory in `dir`; its build-ID, "" on failure.
std::string IndexByBuildId(const testing::TempDir& dir, const std::string& vmlinux) {
  const std::string id = testing::ElfBuildIdHex(vmlinux);
  testing::MustRun("mkdir -p '" + (dir / "dbg/.build-id/") + id.substr(0, 2) + "' && cp '" + vmlinux + "' '" +
                   (dir / "dbg/.build-id/") + id.substr(0, 2) + "/" + id.substr(2) + ".debug'");
  CommandResult ix = Symdex(dir, "index -q --build-id " + id + " --debug-dir '" + (dir / "dbg") + "' --no-debuginfod");
  EXPECT_EQ(ix.exit_code, 0) << ix.out << ix.err;
  return ix.exit_code == 0 ? id : std::string();
}

TEST(CliPaddingTest, APaddingAddressSaysSoAndBorrowsNoLine) {
  testing::TempDir dir;
  const std::string src = dir / "src";
  testing::WriteFile(src + "/kernel/padded.c", R"(__attribute__((noinline)) int before_fn(int x) { return x * 3 + 1; }
asm(".pushsection .text\n.balign 16\n.globl __pfx_padded_fn\n.type __pfx_padded_fn, @function\n__pfx_padded_fn:\n"
    ".skip 16, 0x90\n.size __pfx_padded_fn, 16\n.popsection\n");
__attribute__((noinline, aligned(16))) int padded_fn(int x) { return before_fn(x) + 2; }
)");
  testing::WriteFile(src + "/start.s",
                     ".section .text,\"ax\",@progbits\n.globl _text\n_text:\n"
                     ".section .note.GNU-stack,\"\",@progbits\n");
  const std::string vmlinux = dir / "vmlinux";
  testing::MustRun(
      "cd '" + src + "' && gcc -g -O2 -fno-toplevel-reorder -c kernel/padded.c -o padded.o" +
      " && gcc -c start.s -o start.o && gcc -no-pie -nostartfiles -Wl,-e,padded_fn -Wl,--build-id -Wl,-u,_etext" +
      " start.o padded.o -o '" + vmlinux + "'");
  const uint64_t pfx = testing::NmValue(vmlinux, "__pfx_padded_fn");
  const uint64_t fn = testing::NmValue(vmlinux, "padded_fn");
  ASSERT_EQ(fn, pfx + 16) << "the padding sits right before its function";
  const std::string id = IndexByBuildId(dir, vmlinux);
  ASSERT_FALSE(id.empty());
  auto symdex = [&](const std::string& args) { return Symdex(dir, args); };
  // Control: the line table does cover the padding (with the row before it), so the answer
  // would borrow a line if symdex followed it.
  CommandResult l2a = RunCommand("eu-addr2line -e '" + vmlinux + "' " + testing::HexAddress(pfx + 8));
  EXPECT_NE(l2a.out.find("padded.c:"), std::string::npos) << l2a.out;
  CommandResult r =
      symdex("--json addr --build-id " + id + " " + testing::HexAddress(pfx + 8) + " " + testing::HexAddress(fn));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const json j = json::parse(r.out)["results"];
  ASSERT_EQ(j.size(), 2u) << r.out;
  EXPECT_EQ(j[0]["symbol"], "__pfx_padded_fn") << j[0].dump(1);
  EXPECT_EQ(j[0]["offset"], 8);
  EXPECT_TRUE(j[0]["frames"].empty()) << j[0].dump(1);
  EXPECT_NE(j[0]["note"].get<std::string>().find("function padding before padded_fn"), std::string::npos)
      << j[0].dump(1);
  EXPECT_EQ(j[1]["symbol"], "padded_fn");
  EXPECT_EQ(j[1]["frames"][0]["file"], "kernel/padded.c") << j[1].dump(1);
}

// -fcf-protection=branch puts ENDBR64 before the fentry call of ibt_fn; plain_fn, built
// without it, has its call at the entry. The verdict says where a probe at the entry lands.
TEST(CliPaddingTest, AnIbtFunctionsVerdictSaysAProbeLandsPastItsEndbr) {
  testing::TempDir dir;
  const std::string src = dir / "src";
  testing::WriteFile(src + "/kernel/ibt.c", "__attribute__((noinline)) int ibt_fn(int x) { return x * 5 + 1; }\n");
  testing::WriteFile(src + "/kernel/plain.c",
                     "__attribute__((noinline)) int plain_fn(int x) { return x * 3; }\n"
                     "void __fentry__(void) {}\n");
  testing::WriteFile(src + "/start.s",
                     ".section .text,\"ax\",@progbits\n.globl _text\n_text:\n"
                     ".section .note.GNU-stack,\"\",@progbits\n");
  const std::string vmlinux = dir / "vmlinux";
  const std::string fentry = " -O2 -pg -mfentry -mrecord-mcount ";
  testing::MustRun("cd '" + src + "' && gcc -g" + fentry + "-fcf-protection=branch -c kernel/ibt.c -o ibt.o" +
                   " && gcc -g" + fentry + "-fcf-protection=none -c kernel/plain.c -o plain.o" +
                   " && gcc -c start.s -o start.o && gcc -no-pie -nostartfiles -Wl,-e,ibt_fn -Wl,--build-id" +
                   " -Wl,-u,_etext -Wl,--defsym=__start_mcount_loc=__start___mcount_loc" +
                   " -Wl,--defsym=__stop_mcount_loc=__stop___mcount_loc start.o ibt.o plain.o -o '" + vmlinux + "'");
  // Control: the code is as described (objdump), so the verdicts have something to tell apart.
  CommandResult dis = RunCommand("objdump -d --no-show-raw-insn '" + vmlinux + "' | grep -A1 '<ibt_fn>:'");
  ASSERT_NE(dis.out.find("endbr64"), std::string::npos) << dis.out;
  const std::string id = IndexByBuildId(dir, vmlinux);
  ASSERT_FALSE(id.empty());
  auto symdex = [&](const std::string& args) { return Symdex(dir, args); };
  for (const auto& [name, lands] : {std::pair{"ibt_fn", true}, std::pair{"plain_fn", false}}) {
    CommandResult w = symdex("--json which --build-id " + id + " " + name);
    ASSERT_EQ(w.exit_code, 0) << w.out << w.err;
    const json v = json::parse(w.out)["instances"][0]["verdict"];
    EXPECT_EQ(v["kind"], "traceable") << name << v.dump();
    EXPECT_TRUE(v["ftrace"].get<bool>()) << name << v.dump();
    EXPECT_EQ(v["reason"].get<std::string>().find("lands at +0x4, past its ENDBR64") != std::string::npos, lands)
        << name << v.dump();
  }
}

}  // namespace
}  // namespace symdex
