// The release from what kernel files say of themselves (ingest/kernel_release.h,
// kernel/vmlinux_release.h), its use by the offline loader, and module/vmlinux debug files
// found whatever their release directory is called (debuginfo/files/debug_finder.h).
#include "server/ingest/kernel_release.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "server/debuginfo/files/debug_finder.h"
#include "server/kernel/offline_kernel.h"
#include "server/kernel/vmlinux_release.h"
#include "tests/unit/test_util.h"

namespace symdex {
namespace {

using testing::CompileObject;
using testing::RunCommand;
using testing::TempDir;
using testing::WriteFile;
namespace fs = std::filesystem;

constexpr char kDebianVermagic[] = "6.1.0-57-cloud-amd64 SMP preempt mod_unload modversions ";
constexpr char kDebianBanner[] =
    "Linux version 6.1.0-57-cloud-amd64 (debian-kernel@lists.debian.org) (gcc-12 (Debian 12.2.0-14+deb12u1) 12.2.0, "
    "GNU ld (GNU Binutils for Debian) 2.40) #1 SMP PREEMPT_DYNAMIC Debian 6.1.192-3 (2026-11-20)\n";

TEST(KernelReleaseTest, FromVermagic) {
  EXPECT_EQ(ingest::ReleaseFromVermagic(kDebianVermagic), "6.1.0-57-cloud-amd64");
  EXPECT_EQ(ingest::ReleaseFromVermagic("5.15.0-91-generic SMP mod_unload "), "5.15.0-91-generic");
  EXPECT_EQ(ingest::ReleaseFromVermagic("6.8.0+ SMP"), "6.8.0+");
  EXPECT_EQ(ingest::ReleaseFromVermagic("6.12.3"), "6.12.3");
  EXPECT_EQ(ingest::ReleaseFromVermagic(""), "");
  EXPECT_EQ(ingest::ReleaseFromVermagic("   "), "");
  EXPECT_EQ(ingest::ReleaseFromVermagic("../../etc SMP"), "");  // never a path
  EXPECT_EQ(ingest::ReleaseFromVermagic(std::string(80, '6') + " SMP"), "");
}

TEST(KernelReleaseTest, FromBanner) {
  EXPECT_EQ(ingest::ReleaseFromBanner(kDebianBanner), "6.1.0-57-cloud-amd64");
  EXPECT_EQ(ingest::ReleaseFromBanner("Linux version 6.6.0-rc1+ (u@h) #3"), "6.6.0-rc1+");
  EXPECT_EQ(ingest::ReleaseFromBanner("Linux version  6.1.0 (u@h)"), "");
  EXPECT_EQ(ingest::ReleaseFromBanner("Linux version "), "");
  EXPECT_EQ(ingest::ReleaseFromBanner("linux version 6.1.0"), "");
  EXPECT_EQ(ingest::ReleaseFromBanner("6.1.0-57-cloud-amd64"), "");
}

TEST(KernelReleaseTest, ModinfoValue) {
  constexpr char kModinfo[] = "license=GPL\0names=nope\0name=fake_mod\0vermagic=6.1.0 SMP";
  const std::string_view mi(kModinfo, sizeof kModinfo);  // with the final NUL, as on file
  EXPECT_EQ(ingest::ModinfoValue(mi, "name"), "fake_mod");
  EXPECT_EQ(ingest::ModinfoValue(mi, "vermagic"), "6.1.0 SMP");
  EXPECT_EQ(ingest::ModinfoValue(mi, "license"), "GPL");
  EXPECT_EQ(ingest::ModinfoValue(mi, "author"), "");
  EXPECT_EQ(ingest::ModinfoValue(std::string_view("vermagic=6.2", 12), "vermagic"), "6.2");  // no final NUL
}

TEST(KernelReleaseTest, Majority) {
  auto v = ingest::MajorityRelease({"6.1.0-a", "6.1.0-b", "", "6.1.0-b"});
  EXPECT_EQ(v.release, "6.1.0-b");
  EXPECT_EQ(v.votes, 2u);
  EXPECT_EQ(v.counts.size(), 2u);
  EXPECT_EQ(ingest::MajorityRelease({"6.1.0-b", "6.1.0-a"}).release, "6.1.0-a");  // a tie: stable
  EXPECT_EQ(ingest::MajorityRelease({"", ""}).release, "");
}

// A linked "vmlinux" whose linux_banner says `release` (or, in .bss, says nothing on file).
std::string MakeVmlinux(const TempDir& d, const std::string& name, const std::string& release, bool in_bss = false) {
  const std::string src = in_bss ? "char linux_banner[128];\n"
                                 : "const char linux_banner[] = \"Linux version " + release +
                                       " (builder@host) (gcc) #1 SMP PREEMPT_DYNAMIC\\n\";\n";
  WriteFile(d / (name + ".c"), src + "void _start(void) {}\n");
  const std::string out = d / name;
  auto r = RunCommand("gcc -O2 -nostdlib -static -Wl,--build-id=sha1 -o '" + out + "' '" + (d / (name + ".c")) + "'");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return out;
}

TEST(KernelReleaseTest, VmlinuxReleaseReadsLinuxBanner) {
  TempDir d;
  EXPECT_EQ(*kernel::VmlinuxRelease(MakeVmlinux(d, "vmlinux", "6.1.0-57-cloud-amd64")), "6.1.0-57-cloud-amd64");
  EXPECT_EQ(*kernel::VmlinuxRelease(MakeVmlinux(d, "bss", "x", true)), "");  // no bytes on file: no release
  WriteFile(d / "nomod.c", "int other = 1; void _start(void) {}\n");
  ASSERT_EQ(RunCommand("gcc -nostdlib -static -o '" + (d / "plain") + "' '" + (d / "nomod.c") + "'").exit_code, 0);
  EXPECT_EQ(*kernel::VmlinuxRelease(d / "plain"), "");
  WriteFile(d / "text", "not an ELF");
  EXPECT_FALSE(kernel::VmlinuxRelease(d / "text").ok());
  EXPECT_EQ(kernel::VmlinuxRelease(d / "missing").status().code(), absl::StatusCode::kNotFound);
}

// A module-like object: `name`, its vermagic, a build-ID ending in `id_byte`.
void MakeModule(const std::string& path, const std::string& name, const std::string& vermagic, int id_byte) {
  fs::create_directories(fs::path(path).parent_path());
  std::string mi = "license=GPL\\0name=" + name + "\\0vermagic=" + vermagic;
  CompileObject("static const char mi[] __attribute__((section(\".modinfo\"), used, aligned(1))) = \"" + mi +
                    "\";\n"
                    "__attribute__((noinline)) int " +
                    name + "_fn(int x) { return x + 1; }\n" +
                    "__asm__(\".section .note.gnu.build-id,\\\"a\\\",@note\\n.long 4\\n.long 20\\n.long 3\\n"
                    ".asciz \\\"GNU\\\"\\n.byte 0xde,0xad,0xbe,0xef,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15," +
                    std::to_string(id_byte) + "\\n.previous\\n\");\n",
                path);
}

std::string IdHex(int id_byte) {
  char last[3];
  std::snprintf(last, sizeof last, "%02x", id_byte);
  return std::string("deadbeef0102030405060708090a0b0c0d0e0f") + last;
}

class OfflineReleaseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    WriteFile(dir_ / "map", "ffffffff81000000 T _text\nffffffff81000100 T start_kernel\nffffffff82000000 B _end\n");
  }
  OfflineKernelOptions Opts() { return {.system_map = dir_ / "map", .modules_dir = dir_ / "mods", .jobs = 1}; }
  static bool Mentions(const std::vector<std::string>& warnings, const std::string& text) {
    return std::any_of(warnings.begin(), warnings.end(),
                       [&](const std::string& w) { return w.find(text) != std::string::npos; });
  }
  TempDir dir_;
};

TEST_F(OfflineReleaseTest, VermagicMajorityNamesTheRelease) {
  MakeModule(dir_ / "mods/a.ko", "mod_a", kDebianVermagic, 1);
  MakeModule(dir_ / "mods/b.ko", "mod_b", kDebianVermagic, 2);
  auto t = kernel::LoadOfflineKernel(Opts());
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->release, "6.1.0-57-cloud-amd64");  // "map" and "mods" say nothing
  EXPECT_EQ(t->name, "6.1.0-57-cloud-amd64");
  EXPECT_FALSE(Mentions(t->warnings, "disagree"));

  MakeModule(dir_ / "mods/c.ko", "mod_c", "6.1.0-99-other SMP", 3);
  t = kernel::LoadOfflineKernel(Opts());
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->release, "6.1.0-57-cloud-amd64");
  EXPECT_TRUE(Mentions(t->warnings,
                       "disagree on the kernel release (vermagic: 2 say 6.1.0-57-cloud-amd64, 1 say "
                       "6.1.0-99-other)"))
      << ::testing::PrintToString(t->warnings);

  // --release overrides, and says it differs.
  auto o = Opts();
  o.release = "6.1.0-manual";
  t = kernel::LoadOfflineKernel(o);
  EXPECT_EQ(t->release, "6.1.0-manual");
  EXPECT_TRUE(Mentions(t->warnings, "release 6.1.0-manual (--release) differs from the modules' vermagic"));

  // vmlinux's own banner comes before the modules'.
  o = Opts();
  o.vmlinux = MakeVmlinux(dir_, "vmlinux-x", "6.1.0-from-banner");
  t = kernel::LoadOfflineKernel(o);
  EXPECT_EQ(t->release, "6.1.0-from-banner");
}

TEST_F(OfflineReleaseTest, PathsAreTheLastResort) {
  fs::create_directories(dir_ / "lib/modules/6.1.0-from-path");
  auto o = Opts();
  o.modules_dir = dir_ / "lib/modules/6.1.0-from-path";
  EXPECT_EQ(kernel::LoadOfflineKernel(o)->release, "6.1.0-from-path");
  MakeModule(dir_ / "lib/modules/6.1.0-from-path/a.ko", "mod_a", "6.1.0-from-vermagic SMP", 1);
  EXPECT_EQ(kernel::LoadOfflineKernel(o)->release, "6.1.0-from-vermagic");
}

TEST(DebugFinderLayoutTest, ModulesByBuildIdInAnyReleaseDir) {
  TempDir d;
  const std::string rel = "6.1.0-57-cloud-amd64";
  // Where release R puts it: a file of the module's name but another build.
  MakeModule(d / ("dbg/lib/modules/" + rel + "/kernel/mod_a.ko"), "mod_a", rel, 9);
  // The right one under a release directory named otherwise.
  MakeModule(d / "dbg/lib/modules/renamed/kernel/mod_a.ko", "mod_a", rel, 1);
  // Another module's debug file under a name unlike its own.
  MakeModule(d / "dbg/lib/modules/renamed/kernel/zzz.ko", "mod_b", rel, 2);
  debuginfo::DebugFinder f({.debug_dirs = {d / "dbg"}, .sysroot = d / "none", .use_debuginfod = false});

  auto a = f.Find({.module = "mod_a", .release = rel, .build_id = BuildId::FromHex(IdHex(1))});
  ASSERT_TRUE(a.found.has_value()) << ::testing::PrintToString(a.attempts);
  EXPECT_EQ(a.found->path, d / "dbg/lib/modules/renamed/kernel/mod_a.ko");
  EXPECT_TRUE(a.found->verified);
  auto b = f.Find({.module = "mod_b", .release = rel, .build_id = BuildId::FromHex(IdHex(2))});
  ASSERT_TRUE(b.found.has_value()) << ::testing::PrintToString(b.attempts);
  EXPECT_EQ(b.found->path, d / "dbg/lib/modules/renamed/kernel/zzz.ko");

  // Never a file of another build-ID, wherever it is.
  auto c = f.Find({.module = "mod_a", .release = rel, .build_id = BuildId::FromHex(IdHex(7))});
  EXPECT_FALSE(c.found.has_value());
  EXPECT_EQ(c.status, kernel::DebugFileStatus::kBuildIdMismatch);  // the one under lib/modules/R
  // Without a build-ID to vouch for it, only lib/modules/R is searched.
  auto e = f.Find({.module = "mod_b", .release = rel});
  EXPECT_FALSE(e.found.has_value());
}

TEST(DebugFinderLayoutTest, VmlinuxElsewhereOnlyWhenItsBannerNamesTheRelease) {
  TempDir d;
  fs::create_directories(d / "dbg/lib/modules/renamed");
  fs::copy_file(MakeVmlinux(d, "v1", "6.1.0-57-cloud-amd64"), d / "dbg/lib/modules/renamed/vmlinux");
  fs::create_directories(d / "dbg/boot");
  fs::copy_file(MakeVmlinux(d, "v2", "6.1.0-99-other"), d / "dbg/boot/vmlinux-old");
  debuginfo::DebugFinder f({.debug_dirs = {d / "dbg"}, .sysroot = d / "none", .use_debuginfod = false});
  auto v = f.Find({.module = "", .release = "6.1.0-57-cloud-amd64"});
  ASSERT_TRUE(v.found.has_value()) << ::testing::PrintToString(v.attempts);
  EXPECT_EQ(v.found->path, d / "dbg/lib/modules/renamed/vmlinux");
  EXPECT_FALSE(v.found->verified);
  auto w = f.Find({.module = "", .release = "6.1.0-12-nowhere"});
  EXPECT_FALSE(w.found.has_value());
  EXPECT_EQ(w.status, kernel::DebugFileStatus::kNotFound);
}

}  // namespace
}  // namespace symdex
