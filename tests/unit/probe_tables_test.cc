// The kernel's probe tables read from a compiled miniature kernel (tests/unit/probe_fixture.h),
// the kernel config parser, and the verdicts made from the indexed bits.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <sstream>
#include <stdexcept>

#include "server/debuginfo/files/probe_files.h"
#include "server/ingest/config_text.h"
#include "server/ingest/probe_tables.h"
#include "server/kernel/probe_bits.h"
#include "server/query/probe_verdict.h"
#include "tests/unit/probe_fixture.h"

namespace symdex {
namespace {

using testing::ProbeFixture;

// name -> address (the first of that name) from nm.
std::multimap<std::string, uint64_t> Nm(const std::string& path, const std::string& flags = "") {
  testing::CommandResult r = testing::RunCommand("nm " + flags + " '" + path + "'");
  std::multimap<std::string, uint64_t> out;
  std::istringstream in(r.out);
  std::string addr, type, name;
  while (in >> addr >> type >> name) out.emplace(name, std::stoull(addr, nullptr, 16));
  return out;
}

const ProbeFixture& Fixture() {
  static ProbeFixture* f = new ProbeFixture();
  return *f;
}

TEST(ProbeTablesTest, VmlinuxTablesNameTheFunctionsTheKernelWould) {
  const auto& fx = Fixture();
  auto t = debuginfo::ReadProbeTablesFile(fx.vmlinux);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_FALSE(t->relocatable);
  EXPECT_TRUE(t->fentry_known);
  auto nm = Nm(fx.vmlinux);
  // Exactly the -pg functions: both traced.c functions with fentry, and __init boot_fn; not
  // quiet_fn (notrace), raw_fn (noinstr) or anything of untraced.c.
  std::set<std::string> with_site;
  for (const auto& p : t->fentry) {
    EXPECT_EQ(p.section, "");
    for (const auto& [name, a] : nm) {
      if (a == p.addr) with_site.insert(name);
    }
  }
  EXPECT_EQ(t->fentry.size(), 4u);
  for (const char* f : {"blocked_fn", "traced_entry", "boot_fn"}) EXPECT_TRUE(with_site.count(f)) << f;
  EXPECT_FALSE(with_site.count("quiet_fn"));
  EXPECT_FALSE(with_site.count("raw_fn"));
  EXPECT_FALSE(with_site.count("untraced_entry"));
  ASSERT_EQ(t->blacklist.size(), 1u);
  EXPECT_EQ(t->blacklist[0].addr, nm.find("blocked_fn")->second);
  ASSERT_EQ(t->init_areas.size(), 1u);
  EXPECT_EQ(t->init_areas[0].lo, nm.find("_sinittext")->second);
  EXPECT_EQ(t->init_areas[0].hi, nm.find("_einittext")->second);
  ASSERT_EQ(t->blacklist_areas.size(), 1u);
  EXPECT_EQ(t->blacklist_areas[0].what, ".noinstr.text");
  EXPECT_EQ(t->blacklist_areas[0].lo, nm.find("raw_fn")->second);
}

TEST(ProbeTablesTest, ModuleTablesAreRelocationsIntoItsSections) {
  const auto& fx = Fixture();
  auto t = debuginfo::ReadProbeTablesFile(fx.module);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_TRUE(t->relocatable);
  EXPECT_TRUE(t->fentry_known);
  EXPECT_EQ(t->fentry.size(), 4u);
  size_t in_text = 0, in_init = 0;
  for (const auto& p : t->fentry) {
    in_text += p.section == ".text";
    in_init += p.section == ".init.text";
  }
  EXPECT_EQ(in_text, 3u);
  EXPECT_EQ(in_init, 1u);
  ASSERT_EQ(t->blacklist.size(), 1u);
  EXPECT_EQ(t->blacklist[0].section, ".text");
  ASSERT_EQ(t->init_areas.size(), 1u);
  EXPECT_EQ(t->init_areas[0].section, ".init.text");
  ASSERT_EQ(t->blacklist_areas.size(), 1u);
  EXPECT_EQ(t->blacklist_areas[0].section, ".noinstr.text");
  EXPECT_TRUE(t->notes.empty());
}

TEST(ProbeTablesTest, DamagedImagesAreErrorsNotCrashes) {
  const auto& fx = Fixture();
  std::string img = testing::Slurp(fx.vmlinux);
  ASSERT_FALSE(img.empty());
  for (size_t cut : {size_t{0}, size_t{16}, size_t{64}, img.size() / 2, img.size() - 1}) {
    std::string part = img.substr(0, cut);
    auto t = ingest::ReadProbeTables(std::span<char>(part.data(), part.size()));
    EXPECT_FALSE(t.ok()) << "cut at " << cut;
  }
  auto missing = debuginfo::ReadProbeTablesFile(fx.dir / "no-such-file");
  EXPECT_FALSE(missing.ok());
}

// A module object assembled from `source` with `as` (the host's, or the arm64 cross
// assembler), read as the kernel's tables: the layout its records show and their sites.
ingest::ProbeTables AssembledModule(const std::string& as, const std::string& source) {
  testing::TempDir dir;
  testing::WriteFile(dir / "m.s", source);
  testing::MustRun(as + " '" + (dir / "m.s") + "' -o '" + (dir / "m.o") + "'");
  std::string img = testing::Slurp(dir / "m.o");
  auto t = ingest::ReadProbeTables(std::span<char>(img.data(), img.size()));
  if (!t.ok()) throw std::runtime_error(std::string(t.status().message()));
  return *t;
}

TEST(ProbeTablesTest, EntryLayoutsAreTheRecordsOwnAndSitesAreWhereFtracePatches) {
  // arm64 CALL_OPS (-fpatchable-function-entry=4,2): each record is the first of two 8-aligned
  // NOPs before the symbol; ftrace patches the second NOP at the symbol, past a BTI where the
  // compiler put one first (bti_fn at 8: site 16; plain_fn at 32: site 36).
  constexpr char kCallOps[] = R"(.text
.balign 8
.Lr1: nop
nop
.globl bti_fn
.type bti_fn, %function
bti_fn: hint #34
nop
nop
ret
.size bti_fn, .-bti_fn
.balign 8
.Lr2: nop
nop
.globl plain_fn
.type plain_fn, %function
plain_fn: nop
nop
ret
.size plain_fn, .-plain_fn
.section __patchable_function_entries,"aw",@progbits
.8byte .Lr1
.8byte .Lr2
)";
  ingest::ProbeTables ops = AssembledModule("aarch64-linux-gnu-as", kCallOps);
  ASSERT_NE(ops.layout, nullptr);
  EXPECT_EQ(ops.layout->config, "CONFIG_DYNAMIC_FTRACE_WITH_CALL_OPS") << ops.layout->name;
  ASSERT_EQ(ops.fentry.size(), 2u);
  EXPECT_EQ(ops.fentry[0].section, ".text");
  EXPECT_EQ(ops.fentry[0].addr, 8u + 8u) << "bti_fn (at 8): past its BTI and first NOP";
  EXPECT_EQ(ops.fentry[1].addr, 32u + 4u) << "plain_fn (at 32): its second NOP";

  // arm64 -fpatchable-function-entry=2: the record is the symbol; the site the second NOP.
  constexpr char kPatchable2[] = R"(.text
.globl f
.type f, %function
f: nop
nop
ret
.size f, .-f
.section __patchable_function_entries,"aw",@progbits
.8byte f
)";
  ingest::ProbeTables two = AssembledModule("aarch64-linux-gnu-as", kPatchable2);
  ASSERT_NE(two.layout, nullptr);
  EXPECT_EQ(two.layout->config, "") << two.layout->name;
  EXPECT_EQ(two.layout->pre_words, 0u);
  ASSERT_EQ(two.fentry.size(), 1u);
  EXPECT_EQ(two.fentry[0].addr, 4u);

  // x86-64: the call is the site; a call after an ENDBR64 makes the layout IBT's (ftrace lists
  // sites 4 bytes in), calls at the symbol alone the plain one.
  constexpr char kFentry[] = R"(.text
.globl b_fn
.type b_fn, @function
b_fn:
1: call __fentry__
ret
.size b_fn, .-b_fn
)";
  constexpr char kIbt[] = R"(.globl a_fn
.type a_fn, @function
a_fn: endbr64
2: call __fentry__
ret
.size a_fn, .-a_fn
.section __mcount_loc,"a",@progbits
.quad 1b
.quad 2b
)";
  ingest::ProbeTables ibt = AssembledModule("as", std::string(kFentry) + kIbt);
  ASSERT_NE(ibt.layout, nullptr);
  EXPECT_EQ(ibt.layout->config, "CONFIG_X86_KERNEL_IBT") << ibt.layout->name;
  EXPECT_EQ(ibt.layout->ftrace_entry_max_offset, 4u);
  ASSERT_EQ(ibt.fentry.size(), 2u);
  EXPECT_EQ(ibt.fentry[0].addr, 0u) << "b_fn's call, unmoved";
  EXPECT_EQ(ibt.fentry[1].addr, 6u + 4u) << "a_fn (at 6): the call after its ENDBR64";
  ingest::ProbeTables plain =
      AssembledModule("as", std::string(kFentry) + ".section __mcount_loc,\"a\",@progbits\n.quad 1b\n");
  ASSERT_NE(plain.layout, nullptr);
  EXPECT_EQ(plain.layout->config, "") << plain.layout->name;
  EXPECT_EQ(plain.layout->ftrace_entry_max_offset, 0u);
}

TEST(KernelConfigTest, ReadsTheOptionAsKconfigWritesIt) {
  const std::string cfg = "# comment\nCONFIG_KPROBES=y\n# CONFIG_KPROBE_EVENTS_ON_NOTRACE is not set\nCONFIG_M=m\n";
  EXPECT_TRUE(ingest::LooksLikeKernelConfig(cfg));
  EXPECT_FALSE(ingest::LooksLikeKernelConfig("hello\nworld\n"));
  EXPECT_EQ(ingest::KernelConfigBool(cfg, "CONFIG_KPROBE_EVENTS_ON_NOTRACE"), false);
  EXPECT_EQ(ingest::KernelConfigBool(cfg, "CONFIG_KPROBES"), true);
  EXPECT_EQ(ingest::KernelConfigBool(cfg, "CONFIG_M"), true);
  EXPECT_EQ(ingest::KernelConfigBool(cfg, "CONFIG_KPROBE"), std::nullopt);  // a prefix is not the option
  EXPECT_EQ(ingest::KernelConfigBool("CONFIG_X=n\n", "CONFIG_X"), false);
}

TEST(ProbeVerdictTest, BitsAndConfigMakeTheVerdict) {
  using namespace kernel;
  TargetInfo t;
  store::SymbolRecord r;
  r.name = "f";
  r.type = 't';
  r.probe = kProbeJudged | kProbeFentryEntry | kProbeFentryInside;
  auto v = query::ProbeVerdictOf(t, r);
  EXPECT_EQ(v.kind, query::Probeability::kTraceable);
  EXPECT_TRUE(v.kprobe);
  EXPECT_TRUE(v.ftrace);

  r.probe = kProbeJudged;
  v = query::ProbeVerdictOf(t, r);
  EXPECT_EQ(v.kind, query::Probeability::kNoFentry);
  EXPECT_FALSE(v.kprobe);
  EXPECT_NE(v.reason.find("assumed n"), std::string::npos);
  t.kprobe_events_on_notrace = true;
  EXPECT_TRUE(query::ProbeVerdictOf(t, r).kprobe);  // CONFIG_KPROBE_EVENTS_ON_NOTRACE=y
  t.kprobe_events_on_notrace = false;
  EXPECT_FALSE(query::ProbeVerdictOf(t, r).kprobe);

  r.name = "f.cold";
  r.probe = kProbeJudged | kProbeBaseTraceable;
  v = query::ProbeVerdictOf(t, r);
  EXPECT_TRUE(v.kprobe);
  EXPECT_FALSE(v.ftrace);

  r.probe = kProbeJudged | kProbeFentryEntry | kProbeFentryInside | kProbeBlacklisted;
  v = query::ProbeVerdictOf(t, r);
  EXPECT_EQ(v.kind, query::Probeability::kBlacklisted);
  EXPECT_FALSE(v.kprobe);
  EXPECT_TRUE(v.ftrace);

  r.probe = kProbeJudged | kProbeFentryEntry | kProbeFentryInside | kProbeInit;
  v = query::ProbeVerdictOf(t, r);
  EXPECT_EQ(v.kind, query::Probeability::kInit);
  EXPECT_FALSE(v.kprobe || v.ftrace);

  r.probe = 0;
  EXPECT_EQ(query::ProbeVerdictOf(t, r).kind, query::Probeability::kUnknown);
  r.type = 'd';
  EXPECT_EQ(query::ProbeVerdictOf(t, r).kind, query::Probeability::kNotCode);

  for (auto k : {query::Probeability::kUnknown, query::Probeability::kTraceable, query::Probeability::kNoFentry,
                 query::Probeability::kInit, query::Probeability::kBlacklisted, query::Probeability::kNotCode}) {
    EXPECT_EQ(query::ParseProbeability(query::ProbeabilityName(k)).value(), k);
  }
  EXPECT_FALSE(query::ParseProbeability("bogus").ok());
}

}  // namespace
}  // namespace symdex
