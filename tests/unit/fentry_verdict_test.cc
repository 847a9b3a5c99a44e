// The fentry verdict rules (query/fentry_verdict.h) on copies made by hand: which copy a name
// reaches, by the BTF and the kernel's lookup, and what every other copy is told.
#include "server/query/fentry_verdict.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "server/kernel/probe_bits.h"

namespace symdex::query {
namespace {

constexpr uint32_t kTraceable = kernel::kProbeJudged | kernel::kProbeFentryEntry | kernel::kProbeFentryInside;

Instance Copy(std::string module, std::optional<uint64_t> addr, uint32_t bits, char type = 't') {
  Instance in;
  in.name = "name_show";
  in.module = std::move(module);
  in.type = type;
  in.addr = addr;
  if (!addr) {
    in.section = ".text";
    in.section_offset = 0x40;
  }
  in.verdict.bits = bits;
  if (addr && in.module.empty()) in.text_offset = *addr - 0xffffffff81000000;
  return in;
}

std::vector<FentryReach> Verdicts(const std::string& release, std::vector<Instance>& copies) {
  TargetInfo t;
  t.release = release;
  std::vector<Instance*> ptrs;
  for (Instance& in : copies) ptrs.push_back(&in);
  FillFentryVerdicts(t, ptrs);
  std::vector<FentryReach> out;
  for (const Instance& in : copies) out.push_back(in.fentry.kind);
  return out;
}

constexpr uint32_t kBtf = kernel::kProbeBtfJudged | kernel::kProbeBtfFunc;
constexpr uint32_t kNoBtfFunc = kernel::kProbeBtfJudged;

TEST(FentryVerdict, VmlinuxsBtfReachesItsLowestAddressedCopy) {
  std::vector<Instance> c = {Copy("", 0xffffffff81700000, kTraceable | kBtf),
                             Copy("", 0xffffffff81100000, kTraceable | kBtf),  // lowest
                             Copy("mei", std::nullopt, kTraceable | kNoBtfFunc)};
  EXPECT_EQ(Verdicts("6.1.0-57-cloud-amd64", c),
            (std::vector<FentryReach>{FentryReach::kElsewhere, FentryReach::kReaches, FentryReach::kElsewhere}));
  // The copy reached, named KASLR-free (_text+N): no absolute address in a reason.
  EXPECT_NE(c[0].fentry.reason.find("(vmlinux, _text+1048576)"), std::string::npos) << c[0].fentry.reason;
  EXPECT_EQ(c[0].fentry.reason.find("0xffffffff"), std::string::npos) << c[0].fentry.reason;
  EXPECT_NE(c[0].fentry.reason.find("a kprobe reaches this copy"), std::string::npos) << c[0].fentry.reason;
}

TEST(FentryVerdict, ANameInNoBtfIsRefusedForEveryCopy) {
  std::vector<Instance> c = {Copy("", 0xffffffff81100000, kTraceable | kNoBtfFunc),
                             Copy("uio", std::nullopt, kTraceable | kNoBtfFunc)};
  EXPECT_EQ(Verdicts("6.1.0-57-cloud-amd64", c), (std::vector<FentryReach>{FentryReach::kNoBtf, FentryReach::kNoBtf}));
}

TEST(FentryVerdict, TheCopyTheNameResolvesToWithoutAnFentryCallFailsTheAttach) {
  std::vector<Instance> c = {Copy("", 0xffffffff81100000, kernel::kProbeJudged | kBtf),  // no fentry site
                             Copy("", 0xffffffff81700000, kTraceable | kBtf)};
  EXPECT_EQ(Verdicts("6.1.0-57-cloud-amd64", c),
            (std::vector<FentryReach>{FentryReach::kAttachFails, FentryReach::kAttachFails}));
}

TEST(FentryVerdict, AKernelWithoutFtraceDirectCallsTakesNoTrampolineOnATracedFunction) {
  std::vector<Instance> c = {Copy("", 0xffffffff81100000, kTraceable | kBtf),
                             Copy("", 0xffffffff81700000, kTraceable | kBtf)};
  TargetInfo t;
  t.release = "6.1.0-57-cloud-arm64";
  t.ftrace_direct = false;
  t.kernel_config = "/boot/config-6.1.0-57-cloud-arm64";
  std::vector<Instance*> ptrs = {&c[0], &c[1]};
  FillFentryVerdicts(t, ptrs);
  EXPECT_EQ(c[0].fentry.kind, FentryReach::kAttachFails);
  EXPECT_EQ(c[1].fentry.kind, FentryReach::kAttachFails);
  EXPECT_NE(c[1].fentry.reason.find("CONFIG_DYNAMIC_FTRACE_WITH_DIRECT_CALLS"), std::string::npos)
      << c[1].fentry.reason;
  // With them (or no config to tell), the lowest copy is reached.
  t.ftrace_direct = true;
  FillFentryVerdicts(t, ptrs);
  EXPECT_EQ(c[0].fentry.kind, FentryReach::kReaches);
}

TEST(FentryVerdict, ADataSymbolBelowTheFunctionsTakesTheName) {
  std::vector<Instance> c = {Copy("", 0xffffffff81000000, 0, 'd'), Copy("", 0xffffffff81700000, kTraceable | kBtf)};
  EXPECT_EQ(Verdicts("6.1.0-57-cloud-amd64", c),
            (std::vector<FentryReach>{FentryReach::kAttachFails, FentryReach::kAttachFails}));
}

TEST(FentryVerdict, AModulesBtfResolvesByKallsymsBefore64AndInTheModuleFrom64) {
  // Only uio's BTF has the name; vmlinux has a copy too.
  auto copies = [] {
    return std::vector<Instance>{Copy("", 0xffffffff81100000, kTraceable | kNoBtfFunc),
                                 Copy("uio", 0xffffffffc0001000, kTraceable | kBtf)};
  };
  auto old = copies();
  EXPECT_EQ(Verdicts("6.1.0-57-cloud-amd64", old),
            (std::vector<FentryReach>{FentryReach::kReaches, FentryReach::kElsewhere}));
  auto now = copies();
  EXPECT_EQ(Verdicts("6.12.118+deb12-cloud-arm64", now),
            (std::vector<FentryReach>{FentryReach::kElsewhere, FentryReach::kReaches}));
}

TEST(FentryVerdict, SeveralModulesWithTheNameLeaveItToTheLoadOrder) {
  std::vector<Instance> c = {Copy("mei", 0xffffffffc0001000, kTraceable | kBtf),
                             Copy("uio", 0xffffffffc0200000, kTraceable | kBtf)};
  EXPECT_EQ(Verdicts("6.12.0", c), (std::vector<FentryReach>{FentryReach::kLoadOrder, FentryReach::kLoadOrder}));
}

TEST(FentryVerdict, AnUnreadBtfIsNoVerdict) {
  std::vector<Instance> c = {Copy("", 0xffffffff81100000, kTraceable | kBtf),
                             Copy("mei", std::nullopt, kTraceable)};  // mei's BTF not read
  EXPECT_EQ(Verdicts("6.1.0", c), (std::vector<FentryReach>{FentryReach::kUnknown, FentryReach::kUnknown}));
}

}  // namespace
}  // namespace symdex::query
