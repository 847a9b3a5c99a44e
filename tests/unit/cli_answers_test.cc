// "No answer is better than a wrong one", as a user of the `symdex` binary sees it: addresses
// outside every symbol are not found (exit 1, with why), input that looks truncated is refused
// (exit 3) and the previous index kept, and usage mistakes are named.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include <nlohmann/json.hpp>

#include "tests/unit/test_util.h"

namespace symdex {
namespace {

using nlohmann::json;
using testing::CommandResult;
using testing::CompileObject;
using testing::RunCommand;
using testing::TempDir;
using testing::WriteFile;

// vmlinux: text up to _etext, then data, then _end; uio loaded at 0xffffffffc0a00000 with
// 0x6000 bytes (/proc/modules).
constexpr char kAnswersKallsyms[] = R"(ffffffffa0e00000 T _text
ffffffffa0e00000 T startup_64
ffffffffa0e00100 t name_show
ffffffffa0e00200 T __irqentry_text_end
ffffffffa0e00200 T common_interrupt_return
ffffffffa0e00280 T _etext
ffffffffa1000000 D some_data
ffffffffa2000000 B _end
ffffffffc0a003e0 t name_show	[uio]
ffffffffc0a00440 t uio_open	[uio]
)";

class CliAnswersTest : public ::testing::Test {
 protected:
  CommandResult Symdex(const std::string& args) {
    return RunCommand("env -u DEBUGINFOD_URLS " + std::string(SYMDEX_BIN) + " --db '" + (dir_ / "index.db") + "' " +
                      args);
  }
  std::string MakeSysroot(const std::string& kallsyms) {
    std::string root = dir_ / "root";
    WriteFile(root + "/proc/kallsyms", kallsyms);
    WriteFile(root + "/proc/modules", "uio 24576 0 - Live 0xffffffffc0a00000\n");
    WriteFile(root + "/proc/sys/kernel/osrelease", "6.1.0-fixture\n");
    WriteFile(root + "/sys/module/uio/sections/.text", "0xffffffffc0a00000\n");
    return root;
  }
  // A System.map of `n` functions, and (unless cut) _etext and _end after them, as a real one.
  std::string SystemMap(const std::string& name, int n, bool cut = false) {
    std::string text = "ffffffff81000000 T _text\n";
    for (int i = 0; i < n; ++i) text += fmt::format("{:016x} t fn_{}\n", 0xffffffff81000100ull + 0x100ull * i, i);
    if (!cut) text += "ffffffff82000000 T _etext\nffffffff82800000 D some_data\nffffffff83000000 B _end\n";
    std::string path = dir_ / name;
    WriteFile(path, text);
    return path;
  }
  TempDir dir_;
};

TEST_F(CliAnswersTest, AddressesOutsideEverySymbolAreNotFound) {
  ASSERT_EQ(Symdex("index --sysroot '" + MakeSysroot(kAnswersKallsyms) + "'").exit_code, 0);

  // Found: the output format is unchanged.
  CommandResult in = Symdex("addr 0xffffffffa0e00110");
  EXPECT_EQ(in.exit_code, 0) << in.err;
  EXPECT_EQ(in.out,
            "0xffffffffa0e00110: name_show+0x10/0x100 [vmlinux]\n    [no debug info for this vmlinux/module]\n");
  // A function, not the label sharing its address; the last module symbol runs to uio's end.
  EXPECT_NE(
      Symdex("addr 0xffffffffa0e00210").out.find("0xffffffffa0e00210: common_interrupt_return+0x10/0x80 [vmlinux]"),
      std::string::npos);
  EXPECT_EQ(Symdex("addr 0xffffffffc0a05fff").exit_code, 0);

  const std::pair<const char*, const char*> misses[] = {
      {"0xffffffffc0000000", "0xffffffffc0000000: ?? (not in vmlinux or any module)\n"},  // between them
      {"0xffffffffa0e00280",
       "0xffffffffa0e00280: ?? (in vmlinux but in no function: after _etext, which marks the "
       "end of a code region)\n"},
      {"0xffffffffa1800000",
       "0xffffffffa1800000: ?? (in vmlinux but in no function: after _etext, which marks the "
       "end of a code region)\n"},
      {"0xffffffffa3000000", "0xffffffffa3000000: ?? (not in vmlinux or any module)\n"},  // past _end
      {"0xffffffffc0a06000", "0xffffffffc0a06000: ?? (not in vmlinux or any module)\n"},  // past uio's end
      {"0xffffffff80000000", "0xffffffff80000000: ?? (not in vmlinux or any module)\n"},  // below _text
  };
  for (const auto& [addr, want] : misses) {
    CommandResult r = Symdex(std::string("addr ") + addr);
    EXPECT_EQ(r.exit_code, 1) << addr << "\n" << r.out;
    EXPECT_EQ(r.out, want);
    json j = json::parse(Symdex(std::string("--json addr ") + addr).out);
    EXPECT_FALSE(j["results"][0].contains("symbol")) << j.dump();
    EXPECT_FALSE(j["results"][0]["note"].get<std::string>().empty());
    // Exactly at _etext, resolve names the label (below); past it, nothing.
    if (std::string_view(addr) != "0xffffffffa0e00280") {
      EXPECT_EQ(Symdex(std::string("resolve ") + addr).exit_code, 1) << addr;
    }
  }
  // An address that is exactly a region's end label: no function holds it, but kallsyms names
  // it so and 'which' lists that instance there, so a spec by address names it as its name
  // does: the same instance, the same kprobe answer (verdict and all), not "no instance".
  const CommandResult by_name = Symdex("kprobe -n _etext");
  for (const char* spec : {"0xffffffffa0e00280", "_text+0x280"}) {
    CommandResult r = Symdex(std::string("--json resolve ") + spec);
    EXPECT_EQ(r.exit_code, 0) << spec << "\n" << r.out << r.err;
    json j = json::parse(r.out);
    ASSERT_EQ(j["results"].size(), 1u) << j.dump();
    EXPECT_EQ(j["results"][0]["instance"]["name"], "_etext") << j.dump();
    EXPECT_EQ(j["results"][0]["instance"]["address"], "0xffffffffa0e00280") << j.dump();
    CommandResult k = Symdex(std::string("kprobe -n ") + spec);
    EXPECT_EQ(k.exit_code, by_name.exit_code) << spec << "\n" << k.out << k.err;
    EXPECT_EQ(k.out + k.err, by_name.out + by_name.err) << spec;
  }
  EXPECT_EQ(Symdex("kprobe -n 0xffffffffa0e00281").exit_code, 1);

  // Batches (>= 1,024 addresses: one read of the symbol table; 12,000 of them: several batches,
  // and --json text over several of its chunks) answer exactly as one by one.
  std::string some =
      "0xffffffffa0e00110\n0xffffffffc0000000\n0xffffffffa0e00280\n0xffffffffc0a05fff\n"
      "0xffffffffc0a06000\n0xffffffffa0e00210\n";
  WriteFile(dir_ / "some", some);
  CommandResult one_by_one = Symdex("addr - < '" + (dir_ / "some") + "'");
  ASSERT_EQ(one_by_one.exit_code, 1);
  ASSERT_EQ(std::count(one_by_one.out.begin(), one_by_one.out.end(), '?'), 6) << one_by_one.out;
  std::string many, want;
  for (int i = 0; i < 2000; ++i) {
    many += some;
    want += one_by_one.out;
  }
  WriteFile(dir_ / "many", many);
  CommandResult batch = Symdex("addr - < '" + (dir_ / "many") + "'");
  EXPECT_EQ(batch.exit_code, 1);
  EXPECT_TRUE(batch.out == want) << "the batch answers differently";

  const json one_json = json::parse(Symdex("--json addr - < '" + (dir_ / "some") + "'").out);
  ASSERT_EQ(one_json["results"].size(), 6u) << one_json.dump();
  CommandResult batch_json = Symdex("--json addr - < '" + (dir_ / "many") + "'");
  EXPECT_EQ(batch_json.exit_code, 1);
  ASSERT_GT(batch_json.out.size(), size_t{3} << 19);  // over one 1 MiB chunk
  const json j = json::parse(batch_json.out);
  EXPECT_EQ(batch_json.out, j.dump(2) + "\n");  // one document, as PrintJson prints it
  ASSERT_EQ(j["results"].size(), 12000u);
  for (size_t i = 0; i < j["results"].size(); ++i) {
    ASSERT_EQ(j["results"][i], one_json["results"][i % 6]) << i;
  }
  EXPECT_EQ(j["target"], one_json["target"]);
}

TEST_F(CliAnswersTest, TruncatedSystemMapIsRefusedUnlessForced) {
  const std::string good = SystemMap("System.map-good", 20);
  ASSERT_EQ(Symdex("index --name k --system-map '" + good + "'").exit_code, 0);

  // Cut at a line boundary: every line parses, _etext and _end are gone.
  const std::string cut = SystemMap("System.map-cut", 20, true);
  CommandResult r = Symdex("index --name k --system-map '" + cut + "'");
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_NE(r.err.find(cut + " has no _etext and _end"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("truncated"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--force"), std::string::npos) << r.err;
  EXPECT_EQ(json::parse(Symdex("--json which fn_19").out)["count"], 1);  // the index is intact

  // Complete-looking, but far fewer symbols than the index it would replace.
  const std::string half = SystemMap("System.map-half", 8);
  r = Symdex("index --name k --system-map '" + half + "'");
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_NE(r.err.find(half + " has 12 vmlinux symbols, the current index of target k has 24 (50% fewer): refusing "
                              "to replace it; truncated input? --force replaces it anyway"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(json::parse(Symdex("--json which fn_19").out)["count"], 1);

  // A different target is not compared with k; --force replaces k.
  EXPECT_EQ(Symdex("index --name other --system-map '" + half + "'").exit_code, 0);
  EXPECT_EQ(Symdex("index --name k --force --system-map '" + half + "'").exit_code, 0);
  EXPECT_EQ(Symdex("which fn_19 --target k").exit_code, 1);
  EXPECT_EQ(Symdex("index --name k2 --force --system-map '" + cut + "'").exit_code, 0);
  EXPECT_NE(Symdex("index --help").out.find("--force"), std::string::npos);
}

TEST_F(CliAnswersTest, ShrunkenKallsymsIsRefusedToo) {
  const std::string root = MakeSysroot(kAnswersKallsyms);
  ASSERT_EQ(Symdex("index --sysroot '" + root + "'").exit_code, 0);
  // Half of vmlinux's symbols (the modules' are not counted: they come and go).
  WriteFile(root + "/proc/kallsyms",
            "ffffffffa0e00000 T _text\nffffffffa0e00100 t name_show\n"
            "ffffffffc0a003e0 t name_show\t[uio]\n");
  CommandResult r = Symdex("index --sysroot '" + root + "'");
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_NE(r.err.find("has 2 vmlinux symbols, the current index of target host has 8 (75% fewer)"), std::string::npos)
      << r.err;
  EXPECT_EQ(Symdex("addr 0xffffffffa0e00210").exit_code, 0);  // still the old index
  EXPECT_EQ(Symdex("index --force --sysroot '" + root + "'").exit_code, 0);
}

TEST_F(CliAnswersTest, UsageMistakesAreNamed) {
  CommandResult r = Symdex("frobnicate");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "symdex: unknown command 'frobnicate'; see 'symdex --help'\n");
  EXPECT_EQ(Symdex("--json frobnicate --x").err, "symdex: unknown command 'frobnicate'; see 'symdex --help'\n");
  EXPECT_EQ(Symdex("").exit_code, 2);  // no verb: CLI11's own message

  ASSERT_EQ(Symdex("index --sysroot '" + MakeSysroot(kAnswersKallsyms) + "'").exit_code, 0);
  for (const char* spec : {"name_show@", "name_show@@", "name_show@@x.c"}) {
    r = Symdex(std::string("resolve '") + spec + "'");
    EXPECT_EQ(r.exit_code, 2) << spec;
    EXPECT_NE(r.err.find("bad spec"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("symdex help specs"), std::string::npos) << r.err;
  }

  // A missing input file is an input error (3), named, and the index is not touched.
  r = Symdex("index --system-map '" + (dir_ / "nope/System.map") + "'");
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_NE(r.err.find("--system-map " + (dir_ / "nope/System.map") + ": No such file"), std::string::npos) << r.err;
  r = Symdex("index --system-map '" + SystemMap("System.map-x", 3) + "' --modules-dir '" + (dir_ / "nope") + "'");
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_NE(r.err.find("--modules-dir"), std::string::npos) << r.err;
}

TEST_F(CliAnswersTest, TruncatedModuleIsNotCalledStripped) {
  const std::string mods = dir_ / "mods";
  WriteFile(mods + "/.keep", "");
  CompileObject("int f(int x) { return x + 1; }\nint g(int x) { return f(x) * 2; }\n", mods + "/whole.ko");
  ASSERT_EQ(RunCommand("head -c 700 '" + mods + "/whole.ko' > '" + mods + "/cut.ko' && cp '" + mods + "/whole.ko' '" +
                       mods + "/stripped.ko' && strip '" + mods + "/stripped.ko'")
                .exit_code,
            0);
  ASSERT_EQ(Symdex("index --system-map '" + SystemMap("System.map-m", 3) + "' --modules-dir '" + mods + "'").exit_code,
            0);
  json s = json::parse(Symdex("--json status").out);
  std::map<std::string, std::string> detail;
  for (const auto& f : s["targets"][0]["files"]) {
    std::string path = f["path"];
    if (f["status"] == "error") detail[path.substr(path.rfind('/') + 1)] = f["detail"];
  }
  ASSERT_EQ(detail.size(), 2u) << s.dump();
  EXPECT_NE(detail["cut.ko"].find("truncated"), std::string::npos) << detail["cut.ko"];
  EXPECT_EQ(detail["cut.ko"].find("stripped"), std::string::npos) << detail["cut.ko"];
  EXPECT_NE(detail["stripped.ko"].find("stripped"), std::string::npos) << detail["stripped.ko"];
}

}  // namespace
}  // namespace symdex
