// kas_alias's rule for which duplicated symbols get an alias (server/query/kas_alias.h), on a
// small kernel shaped after the names Debian's 6.1 kernels exposed.
#include "server/query/kas_alias.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace symdex::query {
namespace {

Instance Sym(std::string name, char type, std::string module = "", std::string section = "") {
  Instance in;
  in.name = std::move(name);
  in.type = type;
  in.module = std::move(module);
  in.section = std::move(section);
  in.init_or_exit = in.section.starts_with(".init") || in.section.starts_with(".exit");
  return in;
}

// "name/module/type" -> aliased, for every instance.
std::map<std::string, bool> Aliased(const std::vector<Instance>& all) {
  std::vector<bool> c = KasAliasCandidates(all);
  EXPECT_EQ(c.size(), all.size());
  std::map<std::string, bool> out;
  for (size_t i = 0; i < all.size(); ++i) {
    out[all[i].name + "/" + (all[i].module.empty() ? "vmlinux" : all[i].module) + "/" + all[i].type] = c[i];
  }
  return out;
}

TEST(KasAliasTest, TextSharingItsNameWithDataIsAliased) {
  // The 7 names symdex missed on Debian 6.1.0-47: one function, and data of the same name.
  auto got =
      Aliased({Sym("watchdog", 't'), Sym("watchdog", 'b'), Sym("kern_path", 'T'), Sym("kern_path", 'd'),
               Sym("event_function", 't'), Sym("event_function", 'D'), Sym("set_root", 't'), Sym("set_root", 'd'),
               Sym("set_root", 'd'), Sym("pt_regs_offset", 'T'), Sym("pt_regs_offset", 'd')});
  EXPECT_TRUE(got["watchdog/vmlinux/t"]);
  EXPECT_TRUE(got["kern_path/vmlinux/T"]);
  EXPECT_TRUE(got["event_function/vmlinux/t"]);
  EXPECT_TRUE(got["set_root/vmlinux/t"]);
  EXPECT_TRUE(got["pt_regs_offset/vmlinux/T"]);
  // The data symbols themselves get none (kas_alias without --process_data).
  EXPECT_FALSE(got["watchdog/vmlinux/b"]);
  EXPECT_FALSE(got["kern_path/vmlinux/d"]);
  EXPECT_FALSE(got["set_root/vmlinux/d"]);
}

TEST(KasAliasTest, CountsSpanVmlinuxAndModulesAndEveryType) {
  auto got =
      Aliased({Sym("name_show", 't'), Sym("name_show", 't', "uio", ".text"), Sym("only_once", 't'),
               Sym("verbose", 't', "mod_a", ".text"), Sym("verbose", 'b', "mod_b", ".bss"), Sym("some_data", 'd'),
               Sym("some_data", 'd', "uio", ".data"), Sym("weak_fn", 'W'), Sym("weak_fn", 'T')});
  EXPECT_TRUE(got["name_show/vmlinux/t"]);
  EXPECT_TRUE(got["name_show/uio/t"]);
  EXPECT_FALSE(got["only_once/vmlinux/t"]);
  EXPECT_TRUE(got["verbose/mod_a/t"]);  // its namesake is data in another module
  EXPECT_FALSE(got["some_data/vmlinux/d"]);
  EXPECT_FALSE(got["weak_fn/vmlinux/W"]);  // only t/T are aliased ...
  EXPECT_TRUE(got["weak_fn/vmlinux/T"]);   // ... but W counts
}

TEST(KasAliasTest, SkipsNoiseModuleInitExitAndPseudoModules) {
  auto got = Aliased({Sym("__func__.3", 't'), Sym("__func__.3", 't'), Sym("__pfx_foo", 't'), Sym("__pfx_foo", 't'),
                      Sym("init_module", 'T', "mod_a", ".init.text"), Sym("init_module", 'T', "mod_b", ".init.text"),
                      Sym("cleanup", 't', "mod_a", ".exit.text"), Sym("cleanup", 't', "mod_b", ".text"),
                      Sym("vml_init", 't', "", ".init.text"), Sym("vml_init", 't', "mod_c", ".text"),
                      Sym("bpf_prog_x", 't', "bpf"), Sym("bpf_prog_x", 't', "__builtin__kprobes"), Sym("lone_fn", 't'),
                      Sym("lone_fn", 't', "bpf")});
  EXPECT_FALSE(got["__func__.3/vmlinux/t"]);
  EXPECT_FALSE(got["__pfx_foo/vmlinux/t"]);
  EXPECT_FALSE(got["init_module/mod_a/T"]);
  EXPECT_FALSE(got["init_module/mod_b/T"]);
  EXPECT_FALSE(got["cleanup/mod_a/t"]);  // in .exit.text: counted, not aliased
  EXPECT_TRUE(got["cleanup/mod_b/t"]);   // its .text namesake is
  EXPECT_TRUE(got["vml_init/vmlinux/t"]);
  EXPECT_FALSE(got["bpf_prog_x/bpf/t"]);
  EXPECT_FALSE(got["lone_fn/vmlinux/t"]);  // a pseudo-module copy does not count
}

}  // namespace
}  // namespace symdex::query
