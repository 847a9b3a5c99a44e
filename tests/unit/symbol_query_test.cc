#include "server/query/symbol_query.h"

#include <gtest/gtest.h>

#include "server/store/migrations.h"
#include "server/store/open_index.h"
#include "tests/unit/store_fixture.h"
#include "tests/unit/test_util.h"

namespace symdex::query {
namespace {

using symdex::testing::SmallTarget;
using symdex::testing::TempDir;

class SymbolQueryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto db = store::OpenIndex(dir_ / "i.db", store::IndexUse::kCreate);
    ASSERT_TRUE(db.ok());
    db_ = std::move(*db);
    ASSERT_TRUE(store::ReplaceTarget(db_, SmallTarget("host"), 1).ok());
    auto t = SelectTarget(db_, "");
    ASSERT_TRUE(t.ok()) << t.status();
    target_ = *t;
  }
  TempDir dir_;
  store::Db db_;
  TargetInfo target_;
};

TEST_F(SymbolQueryTest, WhichGivesEachInstanceAProbeTheKernelAccepts) {
  auto found = InstancesNamed(db_, target_, "name_show", /*with_clones=*/false);
  ASSERT_TRUE(found.ok());
  ASSERT_EQ(found->size(), 4u);
  const Instance& v1 = (*found)[0];
  EXPECT_EQ(v1.module, "");
  EXPECT_EQ(v1.text_offset, 0x111dd0u);
  EXPECT_EQ(v1.probe, "_text+1121744");  // decimal, as perf probe -D prints it
  EXPECT_EQ(v1.same_name_total, 4);
  EXPECT_EQ(v1.size, 0xffffffff81200000u - 0xffffffff81111dd0u);  // up to the next symbol (jhash)
  EXPECT_FALSE(v1.size_exact);
  const Instance& mei = (*found)[2];
  EXPECT_EQ(mei.module, "mei");
  EXPECT_FALSE(mei.addr.has_value());
  EXPECT_EQ(mei.section, ".text");
  EXPECT_EQ(mei.probe, "mei:name_show");
  EXPECT_EQ((*found)[3].probe, "uio:name_show");
}

TEST_F(SymbolQueryTest, WhichIncludesClonesUnlessExact) {
  auto all = InstancesNamed(db_, target_, "name_show", true);
  ASSERT_EQ(all->size(), 5u);
  auto cold = std::find_if(all->begin(), all->end(), [](const Instance& i) { return i.name == "name_show.cold"; });
  ASSERT_NE(cold, all->end());
  EXPECT_EQ(cold->probe, "name_show.cold");  // unique name: plain name works
  EXPECT_EQ(InstancesNamed(db_, target_, "name_sho", true)->size(), 0u);
}

TEST_F(SymbolQueryTest, ModuleDuplicateFallsBackToAddress) {
  auto found = InstancesNamed(db_, target_, "jhash", false);
  ASSERT_EQ(found->size(), 4u);
  EXPECT_EQ((*found)[2].module, "uio");
  EXPECT_EQ((*found)[2].same_name_in_module, 2);
  EXPECT_EQ((*found)[2].probe, "0xffffffffc0a00100");
  EXPECT_EQ(InstancesNamed(db_, target_, "unique_fn", false)->at(0).probe, "unique_fn");
}

TEST_F(SymbolQueryTest, DupsCountsTextOverVmlinuxAndModulesSkippingNoise) {
  auto groups = Dups(db_, target_, {});
  ASSERT_TRUE(groups.ok());
  std::vector<std::string> names;
  for (const auto& g : *groups) names.push_back(g.name);
  // __pfx_/CSWTCH noise, data symbols, module init text are out; bpf pseudo-module ignored.
  EXPECT_EQ(names, (std::vector<std::string>{"jhash", "name_show"}));
  EXPECT_EQ((*groups)[1].instances.size(), 4u);

  auto with_init = Dups(db_, target_, {.with_init = true});
  ASSERT_EQ(with_init->size(), 3u);
  EXPECT_EQ((*with_init)[0].name, "init_module");
  EXPECT_TRUE((*with_init)[0].instances[0].init_or_exit);
  auto all_types = Dups(db_, target_, {.all_types = true});
  std::vector<std::string> all_names;
  for (const auto& g : *all_types) all_names.push_back(g.name);
  EXPECT_NE(std::find(all_names.begin(), all_names.end(), "some_data"), all_names.end());
  EXPECT_EQ(std::find(all_names.begin(), all_names.end(), "__func__.12"), all_names.end());
  auto mei = Dups(db_, target_, {.module = "mei"});
  ASSERT_EQ(mei->size(), 1u);                                                       // name_show
  EXPECT_EQ(Dups(db_, target_, {.module = "mei", .with_init = true})->size(), 2u);  // + init_module
  auto vml = Dups(db_, target_, {.module = "vmlinux"});
  EXPECT_EQ(vml->size(), 2u);
}

TEST(AliasNoiseTest, MatchesKasAliasFilters) {
  for (const char* n : {"__pfx_name_show",
                        "__cfi_foo",
                        "__UNIQUE_ID_nop123",
                        "TRACE_SYSTEM_foo",
                        "__TRACE_SYSTEM_x",
                        "__func__.3",
                        "CSWTCH.112",
                        "__key.7",
                        "__wkey.1",
                        "__mkey.2",
                        "__wmkey.3",
                        "_rs.9",
                        "___once_key.4",
                        ".LC12",
                        ".L123.4",
                        "_note_9",
                        "symbols.3",
                        "__compound_literal.0",
                        "__already_done.11",
                        "__msg.5",
                        "___tp_str.1",
                        "__flags.2",
                        "___done.0",
                        "__print_once.8"}) {
    EXPECT_TRUE(IsAliasNoise(n)) << n;
  }
  for (const char* n : {"name_show", "jhash.constprop.0", "__func__", "CSWTCH", "__key", "__func__.x", "_note_",
                        "tcp_v4_rcv.isra.0", "cpumask_weight.constprop.0", "func.cold", ".LCx", "__keys.1"}) {
    EXPECT_FALSE(IsAliasNoise(n)) << n;
  }
}

TEST(SelectTargetTest, DefaultsAndErrors) {
  TempDir d;
  auto db = store::OpenIndex(d / "i.db", store::IndexUse::kCreate);
  EXPECT_EQ(SelectTarget(*db, "").status().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(store::ReplaceTarget(*db, SmallTarget("6.1.0-a", "offline"), 1).ok());
  EXPECT_EQ(SelectTarget(*db, "")->name, "6.1.0-a");  // the only one
  ASSERT_TRUE(store::ReplaceTarget(*db, SmallTarget("6.1.0-b", "offline"), 1).ok());
  auto amb = SelectTarget(*db, "");
  EXPECT_EQ(amb.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(amb.status().message()).find("6.1.0-a, 6.1.0-b"), std::string::npos);
  ASSERT_TRUE(store::ReplaceTarget(*db, SmallTarget("host"), 1).ok());
  EXPECT_EQ(SelectTarget(*db, "")->name, "host");
  EXPECT_EQ(SelectTarget(*db, "6.1.0-b")->name, "6.1.0-b");
  EXPECT_EQ(SelectTarget(*db, "nope").status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace symdex::query
