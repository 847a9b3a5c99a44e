// One instance in each tracer's syntax (query/probe_forms.h): which form names exactly one copy,
// on a live target and an offline one, and what each refuses.
#include "server/query/probe_forms.h"

#include <elf.h>
#include <gtest/gtest.h>

#include "server/common/strings.h"

namespace symdex::query {
namespace {

TargetInfo Target(const std::string& kind) {
  TargetInfo t;
  t.name = kind == "live" ? "host" : "debian";
  t.kind = kind;
  return t;
}

// name_show in vmlinux, one of several copies (one per file), declared in drivers/pnp/card.c.
Match VmlinuxCopy() {
  Match m;
  m.instance.name = "name_show";
  m.instance.addr = 0xffffffffa187ad80;
  m.instance.text_offset = 6794624;
  m.instance.same_name_total = 12;
  m.instance.same_name_in_module = 9;
  DwarfInfo d;
  d.has_function = true;
  d.function = "name_show";
  d.decl_file = "drivers/pnp/card.c";
  d.decl_line = 186;
  m.instance.dwarf = d;
  return m;
}

Match ModuleCopy() {
  Match m;
  m.instance.name = "name_show";
  m.instance.module = "uio";
  m.instance.addr = 0xffffffffc0a01230;
  m.instance.same_name_total = 12;
  m.instance.same_name_in_module = 1;
  return m;
}

// The probe `symdex kprobe -n -e symdex/name_show_card_c_186` describes.
KprobeOptions Probe(const std::string& group = "symdex", const std::string& event = "name_show_card_c_186",
                    bool ret = false, std::vector<std::string> fetchargs = {}) {
  return KprobeOptions{.group = group, .event = event, .ret = ret, .fetchargs = std::move(fetchargs)};
}
const KprobeOptions kLine = Probe();

TEST(ProbeForms, KprobeEventsIsTheLineItself) {
  auto f = FormFor(TracerSyntax::kKprobeEvents, VmlinuxCopy(), Target("offline"), kLine, 0);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->text, "p:symdex/name_show_card_c_186 _text+6794624");
  EXPECT_FALSE(f->address);
}

TEST(ProbeForms, LiveDuplicateIsNamedByItsAddress) {
  const Match m = VmlinuxCopy();
  auto perf = FormFor(TracerSyntax::kPerf, m, Target("live"), kLine, 0);
  ASSERT_TRUE(perf.ok()) << perf.status();
  EXPECT_EQ(perf->text, "perf probe -a 'symdex:name_show_card_c_186=0xffffffffa187ad80'");
  auto bt = FormFor(TracerSyntax::kBpftrace, m, Target("live"), kLine, 0);
  ASSERT_TRUE(bt.ok()) << bt.status();
  EXPECT_EQ(bt->text, "kprobe:0xffffffffa187ad80");
  EXPECT_NE(bt->note.find("--unsafe"), std::string::npos) << bt->note;
  auto lb = FormFor(TracerSyntax::kLibbpf, m, Target("live"), kLine, 0);
  ASSERT_TRUE(lb.ok()) << lb.status();
  EXPECT_EQ(lb->text,
            "LIBBPF_OPTS(bpf_kprobe_opts, opts, .offset = 0xffffffffa187ad80, .retprobe = false); "
            "bpf_program__attach_kprobe_opts(prog, NULL, &opts);");
  EXPECT_NE(lb->note.find("KprobeOptions{Address: 0xffffffffa187ad80}"), std::string::npos) << lb->note;
  EXPECT_EQ(lb->address, 0xffffffffa187ad80u);
}

TEST(ProbeForms, AnOffsetMovesTheAddress) {
  Match m = VmlinuxCopy();
  m.offset = 4;
  auto bt = FormFor(TracerSyntax::kBpftrace, m, Target("live"), Probe("symdex", "x"), 0);
  ASSERT_TRUE(bt.ok()) << bt.status();
  EXPECT_EQ(bt->text, "kprobe:0xffffffffa187ad84");
}

TEST(ProbeForms, OfflineDuplicateHasPerfsDeclFileFormOnlyWhenItIsOneCopy) {
  const Match m = VmlinuxCopy();
  auto one = FormFor(TracerSyntax::kPerf, m, Target("offline"), kLine, 1);
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(one->text, "perf probe -a 'symdex:name_show_card_c_186=name_show@drivers/pnp/card.c'");
  EXPECT_NE(one->note.find("inlined"), std::string::npos) << one->note;
  EXPECT_FALSE(one->address) << "an offline kernel's address is not this boot's";

  auto shared = FormFor(TracerSyntax::kPerf, m, Target("offline"), kLine, 2);
  ASSERT_TRUE(absl::IsFailedPrecondition(shared.status())) << shared.status();
  EXPECT_NE(shared.status().message().find("share the declaration file drivers/pnp/card.c"), std::string::npos);

  EXPECT_TRUE(absl::IsFailedPrecondition(FormFor(TracerSyntax::kBpftrace, m, Target("offline"), kLine, 1).status()));
  auto lb = FormFor(TracerSyntax::kLibbpf, m, Target("offline"), kLine, 1);
  ASSERT_TRUE(absl::IsFailedPrecondition(lb.status()));
  EXPECT_NE(lb.status().message().find("offline kernel"), std::string::npos) << lb.status();
}

TEST(ProbeForms, ALiveTargetWithoutAddressesIsNoLiveAddress) {
  Match m = VmlinuxCopy();
  m.instance.addr.reset();  // an unprivileged caller's view
  auto bt = FormFor(TracerSyntax::kBpftrace, m, Target("live"), kLine, 0);
  ASSERT_TRUE(absl::IsFailedPrecondition(bt.status()));
  EXPECT_NE(bt.status().message().find("not shown the live kernel's addresses"), std::string::npos) << bt.status();
}

TEST(ProbeForms, UniqueInsideItsModule) {
  const Match m = ModuleCopy();
  const KprobeOptions line = Probe("t", "uio_name");
  auto perf = FormFor(TracerSyntax::kPerf, m, Target("offline"), line, 0);
  ASSERT_TRUE(perf.ok()) << perf.status();
  EXPECT_EQ(perf->text, "perf probe -m uio -a 't:uio_name=name_show'");
  auto bt = FormFor(TracerSyntax::kBpftrace, m, Target("offline"), line, 0);
  ASSERT_TRUE(bt.ok()) << bt.status();
  EXPECT_EQ(bt->text, "kprobe:uio:name_show");
  EXPECT_FALSE(bt->address);
  EXPECT_NE(bt->note.find("bpftrace 0.20 or later"), std::string::npos) << bt->note;
  // On the live host, the address: bpftrace 0.17 has no module form, and attaches an address
  // kprobe at exactly that copy; the note names the module form for later versions.
  auto live = FormFor(TracerSyntax::kBpftrace, m, Target("live"), line, 0);
  ASSERT_TRUE(live.ok()) << live.status();
  EXPECT_EQ(live->text, "kprobe:0xffffffffc0a01230");
  EXPECT_TRUE(live->address);
  EXPECT_NE(live->note.find("kprobe:uio:name_show"), std::string::npos) << live->note;
}

TEST(ProbeForms, ReturnProbesAndFetchArgs) {
  const Match m = ModuleCopy();
  auto perf = FormFor(TracerSyntax::kPerf, m, Target("offline"), Probe("t", "ret", true, {"arg1=%ax:u64"}), 0);
  ASSERT_TRUE(perf.ok()) << perf.status();
  EXPECT_EQ(perf->text, "perf probe -m uio -a 't:ret=name_show%return arg1=%ax:u64'");
  auto bt = FormFor(TracerSyntax::kBpftrace, m, Target("offline"), Probe("t", "ret", true), 0);
  ASSERT_TRUE(bt.ok()) << bt.status();
  EXPECT_EQ(bt->text, "kretprobe:uio:name_show");
  // Arguments: read in the program, on the target's architecture.
  const KprobeOptions with_args = Probe("t", "a", false, {"arg1=%di:u32"});
  auto unknown = FormFor(TracerSyntax::kBpftrace, m, Target("offline"), with_args, 0);
  EXPECT_TRUE(absl::IsFailedPrecondition(unknown.status()))
      << "no architecture, no register names: " << unknown.status();
  TargetInfo x86 = Target("offline");
  x86.machine = EM_X86_64;
  auto args = FormFor(TracerSyntax::kBpftrace, m, x86, with_args, 0);
  ASSERT_TRUE(args.ok()) << args.status();
  EXPECT_EQ(args->text, "kprobe:uio:name_show { printf(\"arg1=%lu\\n\", (uint32)reg(\"di\")); }");
  auto lb = FormFor(TracerSyntax::kLibbpf, m, Target("live"), with_args, 0);
  EXPECT_TRUE(absl::IsFailedPrecondition(lb.status())) << lb.status();
  TargetInfo live = Target("live");
  live.machine = EM_X86_64;
  lb = FormFor(TracerSyntax::kLibbpf, m, live, with_args, 0);
  ASSERT_TRUE(lb.ok()) << lb.status();
  EXPECT_NE(lb->text.find(".offset = 0xffffffffc0a01230"), std::string::npos) << lb->text;
  EXPECT_NE(lb->fetch.find("struct a_args {\n\t__u32 arg1;\n};"), std::string::npos) << lb->fetch;
  EXPECT_NE(lb->fetch.find("a->arg1 = (__u32)ctx->di;"), std::string::npos) << lb->fetch;
  EXPECT_NE(lb->fetch.find("/* p:t/a uio:name_show arg1=%di:u32"), std::string::npos) << lb->fetch;
  auto bad = FormFor(TracerSyntax::kBpftrace, m, x86, Probe("t", "a", false, {"+8(%di"}), 0);
  EXPECT_TRUE(absl::IsInvalidArgument(bad.status())) << bad.status();
  auto wrong = FormFor(TracerSyntax::kBpftrace, m, x86, Probe("t", "a", false, {"%x0"}), 0);
  EXPECT_TRUE(absl::IsFailedPrecondition(wrong.status())) << wrong.status();
}

TEST(ProbeForms, UniqueNameKeepsItsName) {
  Match m;
  m.instance.name = "vfs_read";
  m.instance.addr = 0xffffffff81234560;
  m.instance.same_name_total = 1;
  m.instance.same_name_in_module = 1;
  m.offset = 16;
  auto bt = FormFor(TracerSyntax::kBpftrace, m, Target("live"), Probe("symdex", "vfs_read"), 0);
  ASSERT_TRUE(bt.ok()) << bt.status();
  EXPECT_EQ(bt->text, "kprobe:vfs_read+16");
  auto perf = FormFor(TracerSyntax::kPerf, m, Target("live"), Probe("symdex", ""), 0);
  ASSERT_TRUE(perf.ok()) << perf.status();
  EXPECT_EQ(perf->text, "perf probe -a 'symdex:vfs_read=vfs_read+16'") << "no event given: kprobe_events' default name";
  auto at = FormFor(TracerSyntax::kLibbpf, m, Target("offline"), Probe("symdex", "vfs_read"), 0);
  ASSERT_TRUE(at.ok()) << at.status();
  EXPECT_EQ(at->text,
            "LIBBPF_OPTS(bpf_kprobe_opts, opts, .offset = 16, .retprobe = false); "
            "bpf_program__attach_kprobe_opts(prog, \"vfs_read\", &opts);")
      << "an offset into a unique name: libbpf adds it to the name's address";
  EXPECT_NE(at->note.find("KprobeOptions{Offset: 16}"), std::string::npos) << at->note;
  m.offset = 0;
  auto lb = FormFor(TracerSyntax::kLibbpf, m, Target("offline"), Probe("symdex", "vfs_read"), 0);
  ASSERT_TRUE(lb.ok()) << lb.status();
  EXPECT_EQ(lb->text, "bpf_program__attach_kprobe(prog, false, \"vfs_read\");");
}

TEST(ProbeForms, FormatNames) {
  for (auto s : {"kprobe_events", "perf", "bpftrace", "libbpf"}) {
    auto t = TracerSyntaxArg(s);
    ASSERT_TRUE(t.ok()) << s;
    EXPECT_EQ(TracerSyntaxName(*t), s);
  }
  EXPECT_TRUE(absl::IsInvalidArgument(TracerSyntaxArg("systemtap").status()));
}

// A name the kernel keeps with a control byte in it is never put in a kprobe line: the copy is
// named by its address form, its event name kept; an offline module's copy has none, and the line
// KprobeLine gives still names it (the CLI refuses that line, exit 4).
TEST(ProbeForms, KprobeLineNamesAControlByteNameByItsAddress) {
  Match vm = VmlinuxCopy();
  vm.instance.name = std::string(
      "vm\x01"
      "fn");
  vm.instance.same_name_total = 1;
  vm.instance.same_name_in_module = 1;
  vm.instance.dwarf.reset();
  auto line = KprobeLine(vm, Probe("symdex", ""));
  ASSERT_TRUE(line.ok()) << line.status();
  EXPECT_EQ(*line, "p:symdex/vm_fn _text+6794624");
  auto form = FormFor(TracerSyntax::kKprobeEvents, vm, Target("live"), Probe("symdex", ""), 0);
  ASSERT_TRUE(form.ok()) << form.status();
  EXPECT_EQ(form->text, *line);

  Match mod = ModuleCopy();
  mod.instance.name = std::string("ctl\x01name");
  line = KprobeLine(mod, Probe("symdex", ""));
  ASSERT_TRUE(line.ok()) << line.status();
  EXPECT_EQ(*line, "p:symdex/ctl_name_uio 0xffffffffc0a01230");

  mod.instance.addr.reset();  // an offline module: no address
  line = KprobeLine(mod, Probe("symdex", ""));
  ASSERT_TRUE(line.ok()) << line.status();
  EXPECT_TRUE(HasControlByte(*line)) << "the caller refuses it";

  // A name without one keeps its name form.
  line = KprobeLine(ModuleCopy(), Probe("symdex", "e"));
  ASSERT_TRUE(line.ok());
  EXPECT_EQ(*line, "p:symdex/e uio:name_show");
}

TEST(ProbeForms, CiliumNamesAVmlinuxCopyByItsAnchorAndOffsetOnlineAndOffline) {
  for (const char* kind : {"live", "offline"}) {
    auto c = FormFor(TracerSyntax::kCilium, VmlinuxCopy(), Target(kind), kLine, 0);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(c->text, "link.Kprobe(\"_text\", prog, &link.KprobeOptions{Offset: 6794624})");
    EXPECT_FALSE(c->address) << "KASLR-proof: no absolute address";
  }
  Match at = VmlinuxCopy();
  at.offset = 5;
  at.instance.text_anchor = "_stext";  // arm64 without _text in kallsyms
  auto in = FormFor(TracerSyntax::kCilium, at, Target("offline"), Probe("symdex", "x"), 0);
  ASSERT_TRUE(in.ok()) << in.status();
  EXPECT_EQ(in->text, "link.Kprobe(\"_stext\", prog, &link.KprobeOptions{Offset: 6794629})");
  auto ret = FormFor(TracerSyntax::kCilium, VmlinuxCopy(), Target("offline"), Probe("symdex", "x", true), 0);
  ASSERT_TRUE(ret.ok()) << ret.status();
  EXPECT_EQ(ret->text, "link.Kretprobe(\"_text\", prog, &link.KprobeOptions{Offset: 6794624})");
}

TEST(ProbeForms, CiliumNamesAUniqueNameAndRefusesAModulesSharedOne) {
  Match unique = ModuleCopy();
  unique.instance.same_name_total = 1;
  auto u = FormFor(TracerSyntax::kCilium, unique, Target("live"), kLine, 0);
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_EQ(u->text, "link.Kprobe(\"name_show\", prog, nil)");
  auto shared = FormFor(TracerSyntax::kCilium, ModuleCopy(), Target("live"), kLine, 0);
  ASSERT_TRUE(absl::IsFailedPrecondition(shared.status())) << shared.status();
  EXPECT_NE(shared.status().message().find("no MOD:NAME, no address"), std::string::npos) << shared.status();
}

TEST(ProbeForms, FentryIsTheNameWhereTheKernelResolvesItToThisCopy) {
  Match m = VmlinuxCopy();
  m.instance.fentry = {FentryReach::kReaches, "attach here"};
  auto f = FormFor(TracerSyntax::kFentry, m, Target("offline"), kLine, 0);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->text, "fentry/name_show");
  EXPECT_NE(f->note.find("bpftrace kfunc:vmlinux:name_show;"), std::string::npos) << f->note;
  auto x = FormFor(TracerSyntax::kFentry, m, Target("offline"), Probe("symdex", "x", true), 0);
  ASSERT_TRUE(x.ok()) << x.status();
  EXPECT_EQ(x->text, "fexit/name_show");
  EXPECT_TRUE(absl::IsFailedPrecondition(
      FormFor(TracerSyntax::kFentry, m, Target("offline"), Probe("symdex", "x", false, {"count"}), 0).status()));
  m.offset = 4;
  EXPECT_TRUE(absl::IsFailedPrecondition(FormFor(TracerSyntax::kFentry, m, Target("offline"), kLine, 0).status()));

  Match other = VmlinuxCopy();
  other.instance.fentry = {FentryReach::kElsewhere,
                           "fentry/fexit 'name_show' attach to the copy at kernel/irq/irqdesc.c:232"};
  auto e = FormFor(TracerSyntax::kFentry, other, Target("offline"), kLine, 0);
  ASSERT_TRUE(absl::IsFailedPrecondition(e.status())) << e.status();
  EXPECT_NE(e.status().message().find("(elsewhere)"), std::string::npos) << e.status();
  EXPECT_NE(e.status().message().find("kernel/irq/irqdesc.c:232"), std::string::npos) << e.status();
}

TEST(ProbeForms, KprobeMultiIsTheLiveAddressOrAUniqueNameWhereTheKernelHasFprobes) {
  TargetInfo live = Target("live");
  live.fprobe = true;
  Match m = VmlinuxCopy();
  m.instance.verdict = ProbeVerdict{.kind = Probeability::kTraceable, .kprobe = true, .ftrace = true};
  auto by_addr = FormFor(TracerSyntax::kKprobeMulti, m, live, kLine, 0);
  ASSERT_TRUE(by_addr.ok()) << by_addr.status();
  EXPECT_EQ(by_addr->text,
            "const unsigned long addrs[] = {0xffffffffa187ad80}; LIBBPF_OPTS(bpf_kprobe_multi_opts, opts, "
            ".addrs = addrs, .cnt = 1, .retprobe = false); bpf_program__attach_kprobe_multi_opts(prog, NULL, &opts);");
  EXPECT_EQ(by_addr->address, 0xffffffffa187ad80u);
  Match unique = m;
  unique.instance.same_name_total = 1;
  auto by_name = FormFor(TracerSyntax::kKprobeMulti, unique, Target("offline"), kLine, 0);
  ASSERT_TRUE(by_name.ok()) << by_name.status();
  EXPECT_EQ(by_name->text,
            "LIBBPF_OPTS(bpf_kprobe_multi_opts, opts, .retprobe = false); "
            "bpf_program__attach_kprobe_multi_opts(prog, \"name_show\", &opts);");
  EXPECT_NE(by_name->note.find("CONFIG_FPROBE"), std::string::npos) << "no config indexed: " << by_name->note;
  // Offline, a shared name has no address to give.
  EXPECT_TRUE(absl::IsFailedPrecondition(FormFor(TracerSyntax::kKprobeMulti, m, Target("offline"), kLine, 0).status()));
  // Not at an entry, and not where ftrace has no site.
  Match inside = m;
  inside.offset = 4;
  EXPECT_TRUE(absl::IsFailedPrecondition(FormFor(TracerSyntax::kKprobeMulti, inside, live, kLine, 0).status()));
  Match notrace = m;
  notrace.instance.verdict.ftrace = false;
  EXPECT_TRUE(absl::IsFailedPrecondition(FormFor(TracerSyntax::kKprobeMulti, notrace, live, kLine, 0).status()));
}

TEST(ProbeForms, KprobeMultiIsRefusedOnAKernelWithoutFprobes) {
  TargetInfo t = Target("live");
  t.fprobe = false;
  t.kernel_config = "/boot/config-6.1.0-57-cloud-amd64";
  auto f = FormFor(TracerSyntax::kKprobeMulti, VmlinuxCopy(), t, kLine, 0);
  ASSERT_TRUE(absl::IsFailedPrecondition(f.status())) << f.status();
  EXPECT_NE(f.status().message().find("without CONFIG_FPROBE (/boot/config-6.1.0-57-cloud-amd64)"), std::string::npos)
      << f.status();
}

TEST(ProbeForms, PerfsAddressFormTakesNoArgumentsByName) {
  // perf compiles arguments by name only for a function it finds by name: at an address it
  // refuses them (the tracers' guest: "Failed to add events").
  auto named = FormFor(TracerSyntax::kPerf, VmlinuxCopy(), Target("live"), Probe("symdex", "x", false, {"$params"}), 0);
  ASSERT_TRUE(absl::IsFailedPrecondition(named.status())) << named.status();
  EXPECT_NE(named.status().message().find("kprobe_events line"), std::string::npos) << named.status();
  // By name (unique in its module) perf compiles them itself.
  auto by_name =
      FormFor(TracerSyntax::kPerf, ModuleCopy(), Target("live"), Probe("symdex", "x", false, {"$params"}), 0);
  ASSERT_TRUE(by_name.ok()) << by_name.status();
  EXPECT_EQ(by_name->text, "perf probe -m uio -a 'symdex:x=name_show $params'");
}

}  // namespace
}  // namespace symdex::query
