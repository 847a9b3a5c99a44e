// `symdex index` with debug info, end to end on the miniature kernel (tests/unit/kernel_fixture.h):
// offline with --debug-dir, and a live-host sysroot whose debug files come from a real
// debuginfod server on loopback.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "tests/unit/kernel_fixture.h"

namespace symdex {
namespace {

using nlohmann::json;
using testing::CommandResult;
using testing::KernelFixture;
using testing::RunCommand;
using testing::WriteFile;

using testing::kFixtureRelease;

class CliDwarfTest : public ::testing::Test {
 protected:
  CommandResult Symdex(const std::string& args, const std::string& env = "") {
    // Hermetic unless a test names a debuginfod server itself.
    return RunCommand("env -u DEBUGINFOD_URLS " + env + " " + SYMDEX_BIN + " --db '" + (fx_.dir / "index.db") + "' " +
                      args);
  }
  json Json(const std::string& args, const std::string& env = "") {
    CommandResult r = Symdex(args + " --json", env);
    EXPECT_EQ(r.exit_code, 0) << args << "\n" << r.out << r.err;
    return json::parse(r.out);
  }
  void Must(const std::string& cmd) {
    CommandResult r = RunCommand(cmd);
    ASSERT_EQ(r.exit_code, 0) << cmd << "\n" << r.err;
  }
  // System.map as the kernel's mksysmap makes it: nm -n of the linked image.
  std::string SystemMap() {
    std::string map = fx_.dir / ("boot/System.map-" + std::string(kFixtureRelease));
    Must("mkdir -p '" + (fx_.dir / "boot") + "' && nm -n --defined-only '" + fx_.vmlinux + "' > '" + map + "'");
    return map;
  }
  // The `symdex index` arguments for the fixture vmlinux offline: System.map plus a debug root
  // holding the vmlinux (boot/vmlinux-RELEASE), set up on first use.
  std::string OfflineVmlinuxIndexArgs() {
    std::string map = SystemMap();
    std::string dbg = fx_.dir / "debug";
    Must("mkdir -p '" + dbg + "/boot' && cp '" + fx_.vmlinux + "' '" + dbg + "/boot/vmlinux-" + kFixtureRelease + "'");
    return "index --system-map '" + map + "' --debug-dir '" + dbg + "'";
  }
  // The same with the module: its stripped .ko under lib/modules, its debug .ko in the debug root.
  std::string OfflineWithModuleIndexArgs() {
    std::string map = SystemMap();
    std::string mods = fx_.dir / ("lib/modules/" + std::string(kFixtureRelease));
    std::string dbg = fx_.dir / "debug";
    Must("mkdir -p '" + mods + "/kernel/drivers' '" + dbg + "/boot' '" + dbg + "/lib/modules/" + kFixtureRelease +
         "/kernel/drivers'");
    Must("cp '" + fx_.module_stripped + "' '" + mods + "/kernel/drivers/fake_mod.ko'");
    Must("cp '" + fx_.vmlinux + "' '" + dbg + "/boot/vmlinux-" + kFixtureRelease + "'");
    Must("cp '" + fx_.module + "' '" + dbg + "/lib/modules/" + kFixtureRelease + "/kernel/drivers/fake_mod.ko'");
    return "index --system-map '" + map + "' --modules-dir '" + mods + "' --debug-dir '" + dbg + "'";
  }
  KernelFixture fx_{5};
};

TEST_F(CliDwarfTest, OfflineWithDebugDirGivesEachCopyItsSourceAndCachesByBuildId) {
  const std::string args = OfflineWithModuleIndexArgs();
  json first = Json(args);
  EXPECT_EQ(first["debug_files"]["indexed"], 2);
  EXPECT_EQ(first["debug_files"]["missing"], 0);

  json w = Json("which name_show --exact");
  ASSERT_EQ(w["count"], 4);  // a.c and b.c, in vmlinux and in the module
  std::set<std::tuple<std::string, std::string, int64_t>> seen;
  for (const auto& in : w["instances"]) {
    ASSERT_FALSE(in["dwarf"].is_null()) << in.dump();
    std::string cu = in["dwarf"]["cu"];
    EXPECT_TRUE(cu == "drivers/a/a.c" || cu == "drivers/b/b.c") << cu;
    EXPECT_EQ(in["dwarf"]["decl_file"], cu);
    EXPECT_EQ(in["dwarf"]["decl_line"], fx_.Line(cu, "name_show"));
    seen.emplace(in["module"], cu, in["dwarf"]["line"]);
  }
  EXPECT_EQ(seen.size(), 4u);

  // The #included .c: one declaration, two compilation units.
  json lb = Json("which load_binary --exact");
  ASSERT_EQ(lb["count"], 4);
  std::set<std::string> cus;
  for (const auto& in : lb["instances"]) {
    EXPECT_EQ(in["dwarf"]["decl_file"], "fs/binfmt.c");
    cus.insert(in["dwarf"]["cu"]);
  }
  EXPECT_EQ(cus, (std::set<std::string>{"fs/binfmt.c", "fs/compat.c"}));

  // The header inline: same file:line, told apart by CU, flagged.
  json hh = Json("which hdr_helper --exact");
  for (const auto& in : hh["instances"]) {
    EXPECT_EQ(in["dwarf"]["decl_file"], "include/linux/common.h");
    EXPECT_TRUE(in["dwarf"]["inline_copy"]);
  }

  // The .cold part joins to its function, with its own line.
  json cold = Json("which name_show.cold --exact");
  ASSERT_GE(cold["count"], 1);
  EXPECT_EQ(cold["instances"][0]["dwarf"]["function"], "name_show");
  EXPECT_EQ(cold["instances"][0]["dwarf"]["cu"], "drivers/a/a.c");

  // Second run: nothing parsed again.
  json second = Json(args);
  EXPECT_EQ(second["debug_files"]["indexed"], 0);
  EXPECT_EQ(second["debug_files"]["cached"], 2);
  EXPECT_EQ(Json("which name_show --exact")["instances"][0]["dwarf"], w["instances"][0]["dwarf"]);

  json st = Json("status");
  ASSERT_EQ(st["targets"][0]["debuginfo"].size(), 2u);
  for (const auto& d : st["targets"][0]["debuginfo"]) {
    EXPECT_EQ(d["status"], "cached");
    // Which reader read each file, as recorded when it was parsed: symdex's own for vmlinux, and
    // for the ET_REL module too, from the copy symdex relocated (relocated_elf.h).
    EXPECT_EQ(d["reader"], d["module"] == "vmlinux" ? "symdex" : "symdex (relocated by symdex)") << d.dump();
  }
  EXPECT_NE(Symdex("status -v").out.find("read by symdex"), std::string::npos);
}

TEST_F(CliDwarfTest, WrongOrCorruptDebugFilesAreRefusedAndReported) {
  std::string map = SystemMap();
  std::string mods = fx_.dir / ("lib/modules/" + std::string(kFixtureRelease));
  std::string dbg = fx_.dir / "debug";
  Must("mkdir -p '" + mods + "' '" + dbg + "/lib/modules/" + kFixtureRelease + "'");
  Must("cp '" + fx_.module_stripped + "' '" + mods + "/fake_mod.ko'");
  // A module debug file whose build-ID differs (rebuilt with another id), and a corrupt vmlinux.
  Must("objcopy --remove-section .note.gnu.build-id '" + fx_.module + "' '" + dbg + "/lib/modules/" + kFixtureRelease +
       "/fake_mod.ko'");
  WriteFile(dbg + "/lib/modules/" + kFixtureRelease + "/vmlinux",
            "\x7f"
            "ELF garbage");
  CommandResult r = Symdex("index --system-map '" + map + "' --modules-dir '" + mods + "' --debug-dir '" + dbg + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json st = Json("status");
  std::map<std::string, json> by_module;
  for (const auto& d : st["targets"][0]["debuginfo"]) by_module[d["module"]] = d;
  EXPECT_EQ(by_module["fake_mod"]["status"], "build-id-mismatch");
  EXPECT_NE(by_module["fake_mod"]["detail"].get<std::string>().find("has no build-ID"), std::string::npos);
  EXPECT_EQ(by_module["vmlinux"]["status"], "not-found");
  EXPECT_NE(by_module["vmlinux"]["detail"].get<std::string>().find("not an ELF file"), std::string::npos);
  json w = Json("which name_show --exact");
  for (const auto& in : w["instances"]) {
    EXPECT_TRUE(in["dwarf"].is_null());
    EXPECT_NE(in["dwarf_note"].get<std::string>().find("no debug info"), std::string::npos);
  }
}

// A vmlinux whose debug sections objcopy compressed with zstd (which libdw 0.188 cannot read):
// the whole index run — the parse and the address map, workers reading the one decompressed copy
// symdex made — answers byte for byte as from the plain file, and status says what was done.
std::string FirstInstancePlusOne(const std::string& which_json) {  // the first instance's address + 1
  const json w = json::parse(which_json);
  return fmt::format("{:#x}", std::stoull(w["instances"][0]["address"].get<std::string>(), nullptr, 16) + 1);
}

TEST_F(CliDwarfTest, ZstdCompressedVmlinuxAnswersAsThePlainOne) {
  const std::string plain_args = OfflineVmlinuxIndexArgs();
  ASSERT_EQ(Symdex(plain_args).exit_code, 0);
  const std::string which = Symdex("which name_show --exact --json").out;
  const std::string addrs = Symdex("symbols --canonical").out;
  ASSERT_FALSE(addrs.empty());
  const std::string packed = fx_.dir / "debug-zstd";
  Must("mkdir -p '" + packed + "/boot'");
  if (RunCommand("objcopy --compress-debug-sections=zstd '" + fx_.vmlinux + "' '" + packed + "/boot/vmlinux-" +
                 kFixtureRelease + "'")
          .exit_code != 0) {
    GTEST_SKIP() << "objcopy cannot compress with zstd";
  }
  Must("rm -rf '" + (fx_.dir / "index.db") + "'*");
  const std::string map = fx_.dir / ("boot/System.map-" + std::string(kFixtureRelease));
  json run = Json("index --system-map '" + map + "' --debug-dir '" + packed + "'");
  EXPECT_EQ(run["debug_files"]["indexed"], 1);
  EXPECT_EQ(run["addr_maps"]["built"], 1);
  EXPECT_EQ(Symdex("which name_show --exact --json").out, which);
  EXPECT_EQ(Symdex("symbols --canonical").out, addrs);
  json st = Json("status");
  ASSERT_EQ(st["targets"][0]["debuginfo"].size(), 1u);
  EXPECT_EQ(st["targets"][0]["debuginfo"][0]["reader"], "symdex, zstd sections decompressed");
  EXPECT_EQ(st["targets"][0]["addr_map"]["status"], "present");
  // Without the address map, `addr` reads the compressed file's DWARF itself: the same frames.
  const std::string entry = FirstInstancePlusOne(which);
  const std::string with_map = Symdex("addr " + entry).out;
  Must("rm -rf '" + (fx_.dir / "index.db-addrmaps") + "'");
  EXPECT_EQ(Symdex("addr " + entry).out, with_map);
  EXPECT_NE(with_map.find("name_show"), std::string::npos) << with_map;
}

// A --vmlinux symdex cannot read (here: a compressed section of an unknown algorithm) says what
// and why, exits 3, and keeps nothing wrong: the symbols are indexed, without DWARF.
TEST_F(CliDwarfTest, AnUnreadableVmlinuxIsAnInputError) {
  const std::string map = SystemMap();
  const std::string packed = fx_.dir / "vmlinux.zstd";
  if (RunCommand("objcopy --compress-debug-sections=zstd '" + fx_.vmlinux + "' '" + packed + "'").exit_code != 0) {
    GTEST_SKIP() << "objcopy cannot compress with zstd";
  }
  // The compression header's algorithm (ch_type, the first word of .debug_info) becomes 9.
  Must(
      "python3 -c \"import struct,sys; b=bytearray(open(sys.argv[1],'rb').read()); "
      "o=struct.unpack_from('<Q',b,0x28)[0]; "
      "n=struct.unpack_from('<H',b,0x3c)[0]; x=struct.unpack_from('<H',b,0x3e)[0]; h=lambda i: "
      "struct.unpack_from('<IIQQQQ',b,o+i*64); "
      "t=h(x)[4]; [struct.pack_into('<I',b,h(i)[4],9) for i in range(n) if "
      "b[t+h(i)[0]:].split(b'\\0')[0]==b'.debug_info']; "
      "open(sys.argv[1],'wb').write(b)\" '" +
      packed + "'");
  CommandResult r = Symdex("index --system-map '" + map + "' --vmlinux '" + packed + "'");
  EXPECT_EQ(r.exit_code, 3) << r.out << r.err;
  EXPECT_NE(r.err.find(packed + ": .debug_info: compressed with algorithm 9"), std::string::npos) << r.err;
  json w = Json("which name_show --exact");
  ASSERT_EQ(w["count"], 2);
  for (const auto& in : w["instances"]) EXPECT_TRUE(in["dwarf"].is_null()) << in.dump();
}

// hdr_helper (include/linux/common.h) is called out of line through a pointer and inlined into
// a_entry and b_entry: `inlined` lists those two copies with their call sites, and binutils'
// addr2line, asked about each copy's first address, names the same inline nesting.
TEST_F(CliDwarfTest, InlinedListsEveryCopyWithTheCallSiteAddr2lineGives) {
  ASSERT_EQ(Symdex(OfflineVmlinuxIndexArgs()).exit_code, 0);
  json r = Json("inlined hdr_helper");
  EXPECT_EQ(r["name"], "hdr_helper");
  std::map<std::string, json> by_caller;
  for (const auto& s : r["sites"]) by_caller[s["caller"]["name"].get<std::string>()] = s;
  ASSERT_EQ(by_caller.size(), 2u) << r.dump(1);
  // The lines of a_entry and b_entry in the fixture's sources (tests/unit/kernel_fixture.cc).
  struct Want {
    std::string caller, file;
    int line;
  };
  for (const Want& w : {Want{"a_entry", "drivers/a/a.c", 10}, Want{"b_entry", "drivers/b/b.c", 8}}) {
    const std::string& caller = w.caller;
    const std::string& file = w.file;
    ASSERT_TRUE(by_caller.count(caller)) << r.dump(1);
    const json& s = by_caller[caller];
    EXPECT_EQ(s["file"], file);
    EXPECT_EQ(s["line"], w.line);
    EXPECT_EQ(s["inlined_into"], caller);
    EXPECT_EQ(s["depth"], 1);
    // addr2line -i: the inlined function first, then the caller with the call site's line.
    uint64_t at = std::stoull(s["caller"]["address"].get<std::string>(), nullptr, 16) + s["offset"].get<uint64_t>();
    CommandResult a2l = RunCommand(fmt::format("addr2line -i -f -e '{}' {:#x}", fx_.vmlinux, at));
    ASSERT_EQ(a2l.exit_code, 0) << a2l.err;
    std::vector<std::string> lines;
    std::istringstream in(a2l.out);
    for (std::string l; std::getline(in, l);) lines.push_back(l);
    auto it = std::find(lines.begin(), lines.end(), "hdr_helper");
    ASSERT_NE(it, lines.end()) << a2l.out;
    ASSERT_GE(lines.end() - it, 4) << a2l.out;
    EXPECT_EQ(it[2], caller) << a2l.out;
    const std::string call_site = it[3].substr(0, it[3].find(' '));  // "/abs/drivers/a/a.c:10"
    EXPECT_TRUE(call_site.ends_with(file + ":" + std::to_string(s["line"].get<int>()))) << a2l.out;
  }
  // A noinline function was copied nowhere; the text form says so on stderr.
  CommandResult none = Symdex("inlined name_show");
  EXPECT_EQ(none.exit_code, 1) << none.out << none.err;
  EXPECT_NE(none.err.find("not inlined anywhere"), std::string::npos) << none.err;
  CommandResult text = Symdex("inlined hdr_helper");
  EXPECT_EQ(text.exit_code, 0);
  EXPECT_NE(text.out.find("hdr_helper: inlined at 2 places"), std::string::npos) << text.out;
  EXPECT_EQ(Symdex("inlined ''").exit_code, 2);
}

// A module's copies too: each at its section offset, the call site addr2line gives for it in the
// module's own debug file; a definition each, MOD:NAME+OFFSET (the module names the copy).
TEST_F(CliDwarfTest, InlinedListsTheCopiesInModules) {
  ASSERT_EQ(Symdex(OfflineWithModuleIndexArgs()).exit_code, 0);
  json r = Json("inlined hdr_helper");
  std::map<std::string, std::vector<json>> by_module;
  for (const auto& s : r["sites"]) by_module[s["caller"]["module"].get<std::string>()].push_back(s);
  ASSERT_EQ(by_module["vmlinux"].size(), 2u) << r.dump(1);
  ASSERT_EQ(by_module["fake_mod"].size(), 2u) << r.dump(1);
  EXPECT_EQ(r["sites"][0]["caller"]["module"], "vmlinux") << "vmlinux's places first";
  for (const json& s : by_module["fake_mod"]) {
    const std::string caller = s["caller"]["name"];
    const std::string section = s["caller"]["section"];
    ASSERT_FALSE(section.empty()) << s.dump();
    // The symbol's offset in its section, as the module's own symbol table gives it.
    CommandResult nm = RunCommand(fmt::format("nm '{}' | awk '$3 == \"{}\" {{print $1}}'", fx_.module, caller));
    ASSERT_EQ(nm.exit_code, 0) << nm.err;
    const uint64_t at = std::stoull(nm.out, nullptr, 16) + s["offset"].get<uint64_t>();
    CommandResult a2l = RunCommand(fmt::format("addr2line -i -f -j '{}' -e '{}' {:#x}", section, fx_.module, at));
    ASSERT_EQ(a2l.exit_code, 0) << a2l.err;
    EXPECT_EQ(a2l.out.substr(0, a2l.out.find('\n')), "hdr_helper") << a2l.out;
    EXPECT_NE(a2l.out.find(fmt::format("{}:{}", s["file"].get<std::string>(), s["line"].get<int>())), std::string::npos)
        << a2l.out << s.dump();
    EXPECT_EQ(s["probe"], fmt::format("fake_mod:{}+{}", caller, s["offset"].get<uint64_t>())) << s.dump();
  }
  json k = Json("kprobe -n --inlined hdr_helper");
  ASSERT_EQ(k["probes"].size(), 4u) << k.dump(1);
  size_t in_module = 0;
  for (const auto& p : k["probes"]) {
    if (p["caller"]["module"] != "fake_mod") continue;
    ++in_module;
    EXPECT_NE(p["definition"].get<std::string>().find(
                  fmt::format(" fake_mod:{}+{}", p["caller"]["name"].get<std::string>(), p["offset"].get<uint64_t>())),
              std::string::npos)
        << p.dump();
  }
  EXPECT_EQ(in_module, 2u);
}

// Who calls each copy of name_show: a_entry calls a.c's, b_entry b.c's — in vmlinux at the
// address objdump gives each call (its return address less the call's 5 bytes), in the module at
// the caller's offset, as the relocation names the callee there — each with the call's line from
// the debug info; the copies' callers never mixed; a function only called through a pointer has
// no direct caller (exit 1); +OFFSET and an ambiguous name are refused (exit 2).
TEST_F(CliDwarfTest, CallersNameEachCopysOwnCalls) {
  ASSERT_EQ(Symdex(OfflineWithModuleIndexArgs()).exit_code, 0);
  const int call_line = fx_.Line("drivers/a/a.c", "name_show") + 6;  // a_entry's line
  for (const char* which : {"a", "b"}) {
    const std::string entry = std::string(which) + "_entry";
    const std::string copy = fmt::format("name_show@drivers/{}/{}.c", which, which);
    json r = Json(fmt::format("callers 'vmlinux:{}'", copy));
    ASSERT_EQ(r["sites"].size(), 1u) << r.dump(1);
    const json& s = r["sites"][0];
    EXPECT_EQ(s["caller"]["name"], entry) << s.dump();
    EXPECT_FALSE(s["tail_call"].get<bool>()) << s.dump();
    const testing::DirectCall call = testing::ObjdumpDirectCall(fx_.vmlinux, entry, "name_show");
    ASSERT_NE(call.return_address, 0u) << entry << " calls name_show directly";
    EXPECT_EQ(s["address"], testing::HexAddress(call.return_address - 5)) << s.dump();
    EXPECT_EQ(s["address"], testing::HexAddress(testing::NmValue(fx_.vmlinux, entry) + s["offset"].get<uint64_t>()));
    ASSERT_FALSE(s["frames"].empty()) << s.dump();
    EXPECT_EQ(s["frames"][0]["file"], fmt::format("drivers/{}/{}.c", which, which)) << s.dump();
    if (std::string(which) == "a") EXPECT_EQ(s["frames"][0]["line"], call_line) << s.dump();

    json m = Json(fmt::format("callers 'fake_mod:{}'", copy));
    ASSERT_EQ(m["sites"].size(), 1u) << m.dump(1);
    const json& ms = m["sites"][0];
    EXPECT_EQ(ms["caller"]["name"], entry) << ms.dump();
    EXPECT_EQ(ms["caller"]["module"], "fake_mod") << ms.dump();
    EXPECT_TRUE(ms["address"].is_null()) << "an offline module's call has no address: " << ms.dump();
    // The call's offset into the caller, as the .ko's own code and relocation give it.
    CommandResult od =
        RunCommand(fmt::format("objdump -d -w -r '{}' | awk '/<{}>:$/ {{on = 1}} on && /call/ && "
                               "/name_show/ {{print substr($1, 1, length($1) - 1); exit}}'",
                               fx_.module, entry));
    ASSERT_EQ(od.exit_code, 0) << od.err;
    ASSERT_FALSE(od.out.empty()) << "objdump shows " << entry << "'s call in the module";
    CommandResult nm = RunCommand(fmt::format("nm '{}' | awk '$3 == \"{}\" {{print $1}}'", fx_.module, entry));
    EXPECT_EQ(std::stoull(od.out, nullptr, 16) - std::stoull(nm.out, nullptr, 16), ms["offset"].get<uint64_t>())
        << od.out << nm.out << ms.dump();
    EXPECT_EQ(ms["probe"], fmt::format("fake_mod:{}+{}", entry, ms["offset"].get<uint64_t>())) << ms.dump();
    ASSERT_FALSE(ms["frames"].empty()) << ms.dump();
    EXPECT_EQ(ms["frames"][0]["file"], fmt::format("drivers/{}/{}.c", which, which)) << ms.dump();
  }
  CommandResult text = Symdex("callers 'vmlinux:name_show@drivers/a/a.c'");
  EXPECT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("called at 1 place"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find(fmt::format("drivers/a/a.c:{}", call_line)), std::string::npos) << text.out;
  // load_binary is only stored in a pointer: no direct call.
  CommandResult none = Symdex("callers 'vmlinux:load_binary#compat.c'");
  EXPECT_EQ(none.exit_code, 1) << none.out << none.err;
  EXPECT_NE(none.err.find("no direct call"), std::string::npos) << none.err;
  EXPECT_EQ(Symdex("callers name_show").exit_code, 2);
  CommandResult inside = Symdex("callers 'vmlinux:name_show@drivers/a/a.c+1'");
  EXPECT_EQ(inside.exit_code, 2);
  EXPECT_NE(inside.err.find("drop +OFFSET"), std::string::npos) << inside.err;
}

// x86-64 +OFFSET: an offset inside an instruction is refused naming the starts around it, decoded
// from the function's start in its debug file (vmlinux and a module's .ko), as objdump splits it.
TEST_F(CliDwarfTest, OffsetInsideAnInstructionIsRefused) {
  ASSERT_EQ(Symdex(OfflineWithModuleIndexArgs()).exit_code, 0);
  for (const auto& [file, spec] : {std::pair{fx_.vmlinux, std::string("vmlinux:a_entry")},
                                   std::pair{fx_.module, std::string("fake_mod:a_entry")}}) {
    SCOPED_TRACE(spec);
    // objdump's instructions of a_entry: "  OFFSET:\tBYTES..." relative to the symbol's start.
    CommandResult dis = RunCommand(fmt::format("objdump -d -w --disassemble=a_entry '{}'", file));
    ASSERT_EQ(dis.exit_code, 0) << dis.err;
    std::vector<uint64_t> at;
    std::istringstream in(dis.out);
    for (std::string l; std::getline(in, l);) {
      const size_t colon = l.find(":\t");
      if (colon != std::string::npos && !l.empty() && l[0] == ' ')
        at.push_back(std::stoull(l.substr(0, colon), nullptr, 16));
    }
    ASSERT_GE(at.size(), 3u) << dis.out;
    const uint64_t base = at[0];
    size_t k = 0;
    while (k + 1 < at.size() && at[k + 1] - at[k] < 2) ++k;
    ASSERT_LT(k + 1, at.size()) << "no instruction of two bytes or more in a_entry:\n" << dis.out;
    const uint64_t o = at[k] - base, next = at[k + 1] - base;
    CommandResult inside = Symdex(fmt::format("kprobe -n {}+{}", spec, o + 1));
    EXPECT_EQ(inside.exit_code, 2) << inside.out << inside.err;
    EXPECT_NE(inside.err.find(fmt::format("probe at +{} or +{}", o, next)), std::string::npos) << inside.err;
    CommandResult start = Symdex(fmt::format("kprobe -n {}+{}", spec, next));
    EXPECT_EQ(start.exit_code, 0) << start.out << start.err;
  }
}

// kprobe --inlined: a definition at each place `inlined` lists, events NAME, NAME_1; NAME@FILE
// keeps the copies of the function declared in FILE; each argument fetched in its copy or the
// place left out saying why.
TEST_F(CliDwarfTest, KprobeInlinedDefinesEachPlaceInlinedLists) {
  ASSERT_EQ(Symdex(OfflineVmlinuxIndexArgs()).exit_code, 0);
  json sites = Json("inlined hdr_helper");
  std::set<std::pair<std::string, uint64_t>> want;
  for (const auto& s : sites["sites"]) want.insert({s["caller"]["name"], s["offset"].get<uint64_t>()});
  ASSERT_EQ(want.size(), 2u) << sites.dump(1);
  json r = Json("kprobe -n --inlined hdr_helper");
  std::set<std::pair<std::string, uint64_t>> got;
  std::set<std::string> events;
  for (const auto& p : r["probes"]) {
    got.insert({p["caller"]["name"], p["offset"].get<uint64_t>()});
    events.insert(p["event"]);
    EXPECT_TRUE(p["definition"].get<std::string>().starts_with("p:symdex/" + p["event"].get<std::string>() + " "))
        << p.dump();
    EXPECT_TRUE(p["decl_file"].get<std::string>().ends_with("include/linux/common.h")) << p.dump();
  }
  EXPECT_EQ(got, want) << r.dump(1);
  EXPECT_EQ(events, (std::set<std::string>{"hdr_helper", "hdr_helper_1"}));
  EXPECT_EQ(Json("kprobe -n --inlined 'hdr_helper@linux/common.h'")["probes"].size(), 2u);
  CommandResult elsewhere = Symdex("kprobe -n --inlined 'hdr_helper@drivers/a/a.c'");
  EXPECT_EQ(elsewhere.exit_code, 1) << elsewhere.err;
  EXPECT_NE(elsewhere.err.find("declared in drivers/a/a.c"), std::string::npos) << elsewhere.err;
  // The parameter: fetched at each place, or that place left out with the reason.
  // (Every place left out: exit 4, as for one copy's argument that cannot be fetched.)
  CommandResult xr = Symdex("kprobe -n --inlined hdr_helper x --json");
  json x = json::parse(xr.out);
  EXPECT_EQ(xr.exit_code, x["probes"].empty() ? 4 : 0) << xr.out;
  EXPECT_EQ(x["probes"].size() + x["left_out"].size(), 2u) << x.dump(1);
  for (const auto& p : x["probes"]) EXPECT_NE(p["definition"].get<std::string>().find(" x=%"), std::string::npos);
  for (const auto& l : x["left_out"]) EXPECT_NE(l.get<std::string>().find("'x'"), std::string::npos) << l;
  CommandResult unknown = Symdex("kprobe -n --inlined hdr_helper nosuch");
  EXPECT_EQ(unknown.exit_code, 2) << unknown.err;
  EXPECT_EQ(Symdex("kprobe -n --inlined -r hdr_helper").exit_code, 2);
  EXPECT_EQ(Symdex("kprobe -n --inlined name_show").exit_code, 1);  // inlined nowhere
  EXPECT_EQ(Symdex("kprobe -n --inlined 'hdr_helper+4'").exit_code, 2);
}

TEST_F(CliDwarfTest, ResolveCanonicalKprobeAddrAndLines) {
  ASSERT_EQ(Symdex(OfflineVmlinuxIndexArgs()).exit_code, 0);

  // Ambiguous: exit 2 with every candidate's canonical spec; each resolves back to its copy.
  CommandResult amb = Symdex("resolve name_show --json");
  EXPECT_EQ(amb.exit_code, 2);
  json a = json::parse(amb.out);
  ASSERT_EQ(a["results"][0]["status"], "ambiguous");
  ASSERT_EQ(a["results"][0]["candidates"].size(), 2u);
  for (const auto& c : a["results"][0]["candidates"]) {
    json r = Json("resolve '" + c["canonical"].get<std::string>() + "'");
    ASSERT_EQ(r["results"][0]["status"], "ok") << c.dump();
    EXPECT_EQ(r["results"][0]["instance"]["address"], c["address"]);
  }
  // Path suffixes, file:line, the kas_alias form and #CU all select one copy.
  const int b_line = fx_.Line("drivers/b/b.c", "name_show");
  json byfile = Json("resolve name_show@b/b.c name_show@drivers/b/b.c:" + std::to_string(b_line));
  EXPECT_EQ(byfile["results"][0]["instance"]["dwarf"]["cu"], "drivers/b/b.c");
  EXPECT_EQ(byfile["results"][1]["instance"]["dwarf"]["cu"], "drivers/b/b.c");
  json lb = Json("resolve 'load_binary#fs/compat.c'");
  EXPECT_EQ(lb["results"][0]["instance"]["dwarf"]["cu"], "fs/compat.c");
  json kas_line = Json("which load_binary --exact");
  std::string alias = "load_binary@fs_binfmt_c_" + std::to_string(kas_line["instances"][0]["dwarf"]["line"].get<int>());
  CommandResult both = Symdex("resolve '" + alias + "'");
  EXPECT_EQ(both.exit_code, 2) << "both copies share fs/binfmt.c's line: the alias alone is ambiguous";
  EXPECT_EQ(Symdex("resolve no_such_function").exit_code, 1);
  EXPECT_EQ(Symdex("resolve 'name_show@'").exit_code, 2);

  // kprobe: offline, so -n is required; the line names this copy.
  json kp = Json("kprobe -n -e t/b name_show@b.c");
  std::string def = kp["definition"];
  EXPECT_EQ(def.rfind("p:t/b ", 0), 0u) << def;
  EXPECT_EQ(Symdex("kprobe -e t/b name_show@b.c").exit_code, 2) << "writing needs a live target";
  EXPECT_EQ(kp["format"], "kprobe_events");

  // Other tracers' syntax. Offline, so no address form: perf names b.c's copy by its declaration
  // file (the other copy is declared elsewhere); load_binary's two copies share fs/binfmt.c, so
  // perf has no form for one of them; bpftrace and libbpf need the live address.
  json perf = Json("kprobe -n -e t/b --format perf name_show@b.c");
  EXPECT_EQ(perf["format"], "perf");
  EXPECT_EQ(perf["definition"],
            "perf probe -a 't:b=name_show@" + kp["instance"]["dwarf"]["decl_file"].get<std::string>() + "'")
      << perf.dump();
  EXPECT_EQ(perf["kprobe_events"], def);
  CommandResult shared = Symdex("kprobe -n --format perf 'load_binary#fs/compat.c' --json");
  EXPECT_EQ(shared.exit_code, 4) << shared.out << shared.err;
  EXPECT_EQ(json::parse(shared.out)["status"], "no-form");
  EXPECT_NE(shared.out.find("share the declaration file"), std::string::npos) << shared.out;
  for (const char* f : {"bpftrace", "libbpf"}) {
    CommandResult r = Symdex(std::string("kprobe -n --format ") + f + " name_show@b.c");
    EXPECT_EQ(r.exit_code, 4) << f << r.err;
    EXPECT_NE(r.err.find("offline kernel"), std::string::npos) << f << r.err;
  }
  EXPECT_EQ(Symdex("kprobe -n --format systemtap name_show@b.c").exit_code, 2);

  // addr: inside name_show of b.c, one byte in.
  std::string addr = byfile["results"][0]["instance"]["address"];
  uint64_t inside = std::stoull(addr, nullptr, 16) + 1;
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(inside));
  json ad = Json(std::string("addr ") + buf);
  ASSERT_EQ(ad["results"][0]["symbol"], "name_show");
  EXPECT_EQ(ad["results"][0]["offset"], 1);
  ASSERT_GE(ad["results"][0]["frames"].size(), 1u);
  EXPECT_EQ(ad["results"][0]["frames"].back()["function"], "name_show");
  EXPECT_EQ(ad["results"][0]["frames"].back()["file"], "drivers/b/b.c");

  // lines: the body line of b.c's name_show has code in name_show.
  json ln = Json("lines drivers/b/b.c:" + std::to_string(b_line + 2));
  bool found = false;
  for (const auto& x : ln["addresses"]) found |= x["function"] == "name_show";
  EXPECT_TRUE(found) << ln.dump();
}

// `symdex index` leaves vmlinux's address map next to the database; `symdex addr` answers the
// same from it, from DWARF when it is gone or damaged, and the next index run rebuilds it.
TEST_F(CliDwarfTest, AddressMapIsBuiltByIndexAndAnswersAsDwarfDoes) {
  const std::string index = OfflineVmlinuxIndexArgs();
  const std::string map = fx_.dir / ("boot/System.map-" + std::string(kFixtureRelease));
  json first = Json(index);
  EXPECT_EQ(first["addr_maps"]["built"], 1);
  const std::string maps = fx_.dir / "index.db-addrmaps";
  CommandResult ls = RunCommand("ls '" + maps + "'");
  ASSERT_EQ(ls.exit_code, 0);
  ASSERT_NE(ls.out.find(".addrmap"), std::string::npos) << ls.out;
  const std::string file = maps + "/" + ls.out.substr(0, ls.out.find('\n'));

  // Every byte of text from the lowest text symbol of System.map to _etext (beyond it no
  // function is found: exit 1).
  std::ifstream sm(map);
  uint64_t lo = UINT64_MAX, etext = 0;
  std::string a, t, n;
  while (sm >> a >> t >> n) {
    if (n == "_etext") etext = std::stoull(a, nullptr, 16);
    if (t == "t" || t == "T") lo = std::min<uint64_t>(lo, std::stoull(a, nullptr, 16));
  }
  ASSERT_LT(lo, etext);
  std::string addrs;
  char buf[32];
  for (uint64_t x = lo; x < etext; ++x) {
    std::snprintf(buf, sizeof buf, "0x%llx\n", static_cast<unsigned long long>(x));
    addrs += buf;
  }
  WriteFile(fx_.dir / "addrs", addrs);
  const std::string run = "addr - < '" + (fx_.dir / "addrs") + "'";
  CommandResult with_map = Symdex(run);
  ASSERT_EQ(with_map.exit_code, 0) << with_map.err;
  EXPECT_NE(with_map.out.find("(inlined by)"), std::string::npos);

  EXPECT_EQ(with_map.err.find("address map"), std::string::npos) << with_map.err;
  Must("mv '" + maps + "' '" + maps + ".off'");
  CommandResult dwarf = Symdex(run);
  EXPECT_EQ(dwarf.out, with_map.out);
  // Slower without it, and told why (once, on stderr), when the batch is large (>= 1,024).
  std::string many;
  while (std::count(many.begin(), many.end(), '\n') < 1100) many += addrs;
  WriteFile(fx_.dir / "many", many);
  CommandResult big = Symdex("addr - < '" + (fx_.dir / "many") + "'");
  EXPECT_EQ(big.exit_code, 0);
  EXPECT_NE(big.err.find("vmlinux's address map is missing"), std::string::npos) << big.err;
  EXPECT_EQ(big.err.find("address map", big.err.find("address map") + 1), std::string::npos) << "said once";
  Must("mv '" + maps + ".off' '" + maps + "'");

  EXPECT_EQ(Json("status")["targets"][0]["addr_map"]["status"], "present");
  // A damaged map: the answers stay right (libdw), status says what is wrong, and the next
  // index run replaces it.
  Must("truncate -s 100 '" + file + "'");
  CommandResult damaged = Symdex(run);
  EXPECT_EQ(damaged.out, with_map.out);
  json st = Json("status")["targets"][0]["addr_map"];
  EXPECT_EQ(st["status"], "invalid");
  EXPECT_NE(st["detail"].get<std::string>().find("100 bytes"), std::string::npos) << st.dump();
  json again = Json(index);
  EXPECT_EQ(again["addr_maps"]["built"], 1);
  EXPECT_GT(std::stoull(RunCommand("stat -c %s '" + file + "'").out), 100u);
  json third = Json(index);
  EXPECT_EQ(third["addr_maps"]["built"], 0);
  EXPECT_EQ(third["addr_maps"]["present"], 1);

  // --no-addr-map: none built, answers unchanged.
  Must("rm -rf '" + maps + "'");
  json none = Json(index + " --no-addr-map");
  EXPECT_EQ(none["addr_maps"]["built"], 0);
  EXPECT_NE(RunCommand("ls '" + maps + "'/*.addrmap").exit_code, 0);  // (the text-symbol file is there)
  EXPECT_EQ(Symdex(run).out, with_map.out);
}

// `symdex addr -` answers each address as soon as it is written, before stdin is closed (a
// frontend keeps one process and a pipe, as with addr2line).
TEST_F(CliDwarfTest, AddrFromStdinAnswersBeforeEndOfInput) {
  ASSERT_EQ(Symdex(OfflineVmlinuxIndexArgs()).exit_code, 0);
  json w = Json("which name_show --exact");
  std::string addr = w["instances"][0]["address"];
  // The writer sends one address, then waits until the answer has arrived before closing.
  const std::string fifo = fx_.dir / "answers";
  Must("mkfifo '" + fifo + "'");
  CommandResult ok =
      RunCommand("timeout 20 sh -c '( echo " + addr + "; read -r line < " + fifo + "; echo \"got: $line\" >&2 ) | " +
                 SYMDEX_BIN + " --db " + (fx_.dir / "index.db") + " addr - > " + fifo + "'");
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  char want[64];
  std::snprintf(want, sizeof want, "got: 0x%llx: name_show+0x0", std::stoull(addr, nullptr, 16));
  EXPECT_NE(ok.err.find(want), std::string::npos) << ok.err;
}

TEST_F(CliDwarfTest, LiveHostWithDebugFilesFromARealDebuginfodServer) {
  // The sysroot: kallsyms from nm (vmlinux at link addresses; the module loaded at two bases).
  std::string root = fx_.dir / "root";
  testing::MakeLiveSysroot(fx_, root, kFixtureRelease, /*with_module=*/true);

  // debuginfod serving the two debug files from a plain directory.
  std::string served = fx_.dir / "served";
  Must("mkdir -p '" + served + "' && cp '" + fx_.vmlinux + "' '" + fx_.module + "' '" + served + "/'");
  testing::DebuginfodServer server(served);
  ASSERT_TRUE(server.ready()) << "debuginfod did not become ready";
  const std::string url = server.url();

  std::string env = "DEBUGINFOD_URLS=" + url + " DEBUGINFOD_CACHE_PATH='" + (fx_.dir / "dcache") + "'";
  json idx = Json("index --sysroot '" + root + "'", env);
  EXPECT_EQ(idx["debug_files"]["indexed"], 2) << idx.dump();

  json st = Json("status");
  for (const auto& d : st["targets"][0]["debuginfo"]) {
    EXPECT_EQ(d["status"], "used") << d.dump();
    EXPECT_EQ(d["origin"], "debuginfod") << d.dump();
  }
  json w = Json("which name_show --exact");
  ASSERT_EQ(w["count"], 4);
  for (const auto& in : w["instances"]) {
    ASSERT_FALSE(in["dwarf"].is_null()) << in.dump();
    EXPECT_EQ(in["dwarf"]["decl_line"], fx_.Line(in["dwarf"]["cu"], "name_show"));
  }
  // The live module's .cold part, at an absolute address, maps back through its section base.
  json cold = Json("which name_show.cold --exact");
  ASSERT_EQ(cold["count"], 2);
  for (const auto& in : cold["instances"]) EXPECT_EQ(in["dwarf"]["function"], "name_show") << in.dump();

  // `addr` inside the loaded module: the inline chain from the module's relocatable DWARF, at
  // the section offset /sys/module/.../sections gives, as eu-addr2line -j SECTION tells it.
  size_t checked = 0;
  for (const auto& [section, base] :
       {std::pair<std::string, uint64_t>{".text", 0xffffffffc0000000ull}, {".text.unlikely", 0xffffffffc0010000ull}}) {
    json syms = Json("symbols -m fake_mod");
    for (const auto& in : syms["symbols"]) {
      uint64_t a = std::stoull(in["address"].get<std::string>(), nullptr, 16);
      // (The last symbol of a section gets the gap to the next section as its kallsyms size.)
      if (a < base || a >= base + 0x10000 || !in["size"].is_number() || in["size"].get<uint64_t>() < 2 ||
          in["size"].get<uint64_t>() > 0x400) {
        continue;
      }
      uint64_t probe = a + in["size"].get<uint64_t>() / 2;  // mid-function
      char hex[32];
      std::snprintf(hex, sizeof hex, "0x%llx", static_cast<unsigned long long>(probe));
      json r = Json(std::string("addr ") + hex);
      ASSERT_EQ(r["results"].size(), 1u);
      const json& got = r["results"][0];
      EXPECT_EQ(got["module"], "fake_mod") << got.dump();
      EXPECT_FALSE(got.contains("note")) << got.dump();
      char off[32];
      std::snprintf(off, sizeof off, "0x%llx", static_cast<unsigned long long>(probe - base));
      CommandResult eu = RunCommand("eu-addr2line -e '" + fx_.module + "' -i -f -j " + section + " " + off);
      ASSERT_EQ(eu.exit_code, 0) << eu.err;
      // eu-addr2line: "function\n/abs/path/file.c:LINE[:COL]\n" per frame, leaf first.
      std::istringstream lines(eu.out);
      std::vector<std::pair<std::string, std::string>> want;
      for (std::string fn, where; std::getline(lines, fn) && std::getline(lines, where);) want.emplace_back(fn, where);
      ASSERT_EQ(got["frames"].size(), want.size()) << got.dump() << "\n" << eu.out;
      // eu-addr2line names no functions in an ET_REL file ("??"); the outermost frame must be the
      // symbol itself, the inner ones are checked by their call sites' file:line.
      EXPECT_EQ(got["frames"].back()["function"], got["symbol"]) << got.dump();
      for (size_t i = 0; i < want.size(); ++i) {
        const json& f = got["frames"][i];
        std::string fn = f["function"];  // our outermost frame keeps the clone suffix (name_show.cold)
        if (want[i].first != "??") {
          EXPECT_TRUE(fn == want[i].first || fn.starts_with(want[i].first + ".")) << fn;
        }
        std::string where = want[i].second;  // /abs/.../drivers/a/a.c:12:5 -> compare file suffix and line
        std::string file = f["file"];
        EXPECT_NE(where.find(file + ":" + std::to_string(f["line"].get<int>())), std::string::npos)
            << file << ":" << f["line"] << " vs " << where;
      }
      ++checked;
    }
  }
  EXPECT_GE(checked, 4u);

  // Those module answers came from the module's address map, built by the index run with
  // vmlinux's; without the maps, libdwfl gives the same bytes for every byte of both sections.
  EXPECT_EQ(idx["addr_maps"]["built"], 2) << idx.dump();
  const std::string maps = fx_.dir / "index.db-addrmaps";
  EXPECT_EQ(RunCommand("ls '" + maps + "' | grep -c '\\.addrmap$'").out, "2\n");
  std::string addrs;
  for (uint64_t base : {0xffffffffc0000000ull, 0xffffffffc0010000ull}) {
    for (uint64_t x = base; x < base + 0x300; ++x) addrs += testing::HexAddress(x) + "\n";
  }
  WriteFile(fx_.dir / "module-addrs", addrs);
  const std::string run = "addr - < '" + (fx_.dir / "module-addrs") + "'";
  CommandResult with_maps = Symdex(run);
  Must("mv '" + maps + "' '" + maps + ".off'");
  CommandResult libdwfl = Symdex(run);
  Must("mv '" + maps + ".off' '" + maps + "'");
  EXPECT_EQ(with_maps.exit_code, libdwfl.exit_code);
  EXPECT_TRUE(with_maps.out == libdwfl.out) << "module answers differ with and without the address maps";
  EXPECT_GT(std::count(with_maps.out.begin(), with_maps.out.end(), '\n'), 0x300);

  // `lines` finds the line's code in vmlinux and in the loaded module, each module address at
  // the section offset where eu-addr2line -j SECTION puts that line.
  const int body = fx_.Line("drivers/a/a.c", "name_show") + 2;
  const std::string where = "drivers/a/a.c:" + std::to_string(body);
  json ln = Json("lines " + where);
  size_t in_vmlinux = 0, in_module = 0;
  for (const auto& x : ln["addresses"]) {
    uint64_t a = std::stoull(x["address"].get<std::string>(), nullptr, 16);
    if (a < 0xffffffffc0000000ull) {
      ++in_vmlinux;
      continue;
    }
    ++in_module;
    const bool cold = a >= 0xffffffffc0010000ull;
    char off[32];
    std::snprintf(off, sizeof off, "0x%llx",
                  static_cast<unsigned long long>(a - (cold ? 0xffffffffc0010000ull : 0xffffffffc0000000ull)));
    CommandResult eu =
        RunCommand("eu-addr2line -e '" + fx_.module + "' -j " + (cold ? ".text.unlikely" : ".text") + " " + off);
    ASSERT_EQ(eu.exit_code, 0) << eu.err;
    EXPECT_NE(eu.out.find("a.c:" + std::to_string(body)), std::string::npos) << x.dump() << " vs " << eu.out;
    EXPECT_EQ(x["probe"], x["address"]) << "a module address is its own kprobe target";
  }
  EXPECT_GE(in_vmlinux, 1u) << ln.dump();
  EXPECT_GE(in_module, 1u) << ln.dump();
}

}  // namespace
}  // namespace symdex
