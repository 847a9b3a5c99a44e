// A real jitdump from Node 20: `node --perf-prof --interpreted-frames-native-stack` gives every JS
// function its own byte-identical copy of the interpreter entry trampoline -- the collision case
// from the linux-perf thread. Node is a required test dependency: if it is missing, this fails.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>

#include "server/common/strings.h"
#include "server/ingest/jitdump.h"
#include "server/jit/build_ids.h"
#include "tests/jit/node_script.h"
#include "tests/unit/test_util.h"

namespace symdex::jit {
namespace {

using namespace symdex::ingest;  // the jitdump parser's types (server/ingest/jitdump.h)

namespace fs = std::filesystem;
using symdex::testing::RunCommand;
using symdex::testing::TempDir;
using symdex::testing::WriteFile;

constexpr const char* kScript = symdex::testing::kNodeJitScript;

using symdex::testing::Slurp;

// Runs node once per process; every test then checks the same dump. Problems are reported from
// SetUp (a test failure) rather than SetUpTestSuite, which GoogleTest and ctest report as skips.
struct NodeRun {
  TempDir dir;
  std::string dump_path;
  std::string bytes;
  std::string error;  // non-empty: why there is no dump
};

const NodeRun& RunNodeOnce() {
  // Destroyed at exit, which removes the directory.
  static const std::unique_ptr<NodeRun> run = [] {
    auto r = std::make_unique<NodeRun>();
    auto version = RunCommand("node --version");
    if (version.exit_code != 0) {
      r->error = "node is required for this test (apt-get install nodejs): " + version.err;
      return r;
    }
    WriteFile(r->dir / "script.js", kScript);
    auto node =
        RunCommand("cd '" + r->dir.path() + "' && node --perf-prof --interpreted-frames-native-stack script.js");
    if (node.exit_code != 0 || node.out != "2448875000\n") {
      r->error = "node failed: " + node.out + node.err;
      return r;
    }
    for (const auto& entry : fs::directory_iterator(r->dir.path())) {
      std::string name = entry.path().filename().string();
      if (name.starts_with("jit-") && name.ends_with(".dump")) r->dump_path = entry.path().string();
    }
    if (r->dump_path.empty()) {
      r->error = "node wrote no jit-<pid>.dump in " + r->dir.path();
      return r;
    }
    r->bytes = Slurp(r->dump_path);
    return r;
  }();
  return *run;
}

class NodeJitdumpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const NodeRun& run = RunNodeOnce();
    ASSERT_TRUE(run.error.empty()) << run.error;
    dir_ = &run.dir;
    dump_path_ = run.dump_path;
    bytes_ = &run.bytes;
    auto dump = ParseJitdump(*bytes_, dump_path_);
    ASSERT_TRUE(dump.ok()) << dump.status();
    dump_ = std::move(*dump);
    for (const auto& r : dump_.records) {
      if (const auto* load = std::get_if<CodeLoad>(&r)) loads_.push_back(load);
    }
  }

  // For each ID: the distinct names of the loads that got it.
  std::map<std::string, std::set<std::string>> NamesById(JitBuildIdScheme scheme) {
    std::map<std::string, std::set<std::string>> out;
    for (const CodeLoad* load : loads_) {
      auto id = JitBuildId(scheme, dump_.header, *load);
      EXPECT_TRUE(id.ok()) << id.status();
      if (id.ok()) out[id->ToHex()].insert(load->name);
    }
    return out;
  }

  const TempDir* dir_ = nullptr;
  std::string dump_path_;
  const std::string* bytes_ = nullptr;
  Jitdump dump_;
  std::vector<const CodeLoad*> loads_;
};

TEST_F(NodeJitdumpTest, ParsesTheWholeDump) {
  EXPECT_EQ(dump_.header.version, 1u);
  EXPECT_EQ(dump_.header.byte_order, std::endian::little);
  EXPECT_TRUE(dump_.header.elf_mach == 62 || dump_.header.elf_mach == 183) << dump_.header.elf_mach;
  EXPECT_EQ(dump_path_, StrCat(dir_->path(), "/jit-", dump_.header.pid, ".dump"));
  EXPECT_FALSE(dump_.truncated) << "at " << dump_.truncated_at;
  EXPECT_GT(loads_.size(), 500u);

  std::set<std::string> fn_names;
  size_t with_unwinding = 0, with_debug = 0;
  uint64_t last_ts = 0;
  for (const CodeLoad* load : loads_) {
    EXPECT_EQ(load->pid, dump_.header.pid);
    EXPECT_EQ(load->code.size(), load->code_size);
    EXPECT_GE(load->prefix.timestamp, last_ts) << "timestamps go forward";
    last_ts = load->prefix.timestamp;
    if (load->name.starts_with("JS:~fn_")) fn_names.insert(load->name.substr(0, load->name.find(' ')));
    if (load->unwinding_info) ++with_unwinding;
    if (load->debug_info && !load->debug_info->entries.empty()) ++with_debug;
  }
  EXPECT_EQ(fn_names.size(), 50u);
  EXPECT_EQ(with_unwinding, loads_.size()) << "node writes UNWINDING_INFO before every CODE_LOAD";
  EXPECT_GT(with_debug, 0u) << "node writes DEBUG_INFO for JS functions";
}

TEST_F(NodeJitdumpTest, ReadingItWhileItGrowsGivesTheSameRecords) {
  JitdumpReader reader(dump_path_);
  std::vector<Record> records;
  for (size_t visible = 0; visible < bytes_->size() + 4096; visible += 4096) {
    std::string_view now = std::string_view(*bytes_).substr(0, std::min(visible, bytes_->size()));
    auto fed = reader.Feed(now.substr(reader.offset()), &records);
    ASSERT_TRUE(fed.ok()) << fed.status();
  }
  EXPECT_EQ(records, dump_.records);
}

TEST_F(NodeJitdumpTest, Sha1CodeCollidesAcrossDistinctNames) {
  auto by_id = NamesById(JitBuildIdScheme::kSha1Code);
  size_t biggest = 0;
  std::set<std::string> fn_sharing;
  for (const auto& [id, names] : by_id) {
    biggest = std::max(biggest, names.size());
    if (names.size() < 2) continue;
    for (const auto& n : names) {
      if (n.starts_with("JS:~fn_")) fn_sharing.insert(n.substr(0, n.find(' ')));
    }
  }
  // The trampoline copies: one ID for (at least) all 50 of our functions.
  EXPECT_GE(biggest, 50u);
  EXPECT_EQ(fn_sharing.size(), 50u);
}

TEST_F(NodeJitdumpTest, Sha1SymtabSeparatesDistinctNames) {
  auto by_id = NamesById(JitBuildIdScheme::kSha1Symtab);
  for (const auto& [id, names] : by_id) {
    EXPECT_EQ(names.size(), 1u) << "sha1-symtab ID " << id << " shared by " << names.size() << " names, e.g. "
                                << *names.begin();
  }
  EXPECT_GT(by_id.size(), NamesById(JitBuildIdScheme::kSha1Code).size());
}

TEST_F(NodeJitdumpTest, Sha1SymtabStillCollidesForTheSameNameAndCode) {
  // The 50 `new Function` wrappers share one name and the trampoline's code: one sha1-symtab ID
  // for all of them -- the case the symdex scheme exists for.
  std::map<std::string, std::vector<const CodeLoad*>> loads_by_id;
  for (const CodeLoad* load : loads_) {
    auto id = JitBuildId(JitBuildIdScheme::kSha1Symtab, dump_.header, *load);
    ASSERT_TRUE(id.ok()) << id.status();
    loads_by_id[id->ToHex()].push_back(load);
  }
  size_t biggest = 0;
  for (const auto& [id, loads] : loads_by_id) biggest = std::max(biggest, loads.size());
  EXPECT_GE(biggest, 50u);
}

TEST_F(NodeJitdumpTest, SymdexSchemeGivesEveryLoadItsOwnId) {
  std::set<std::string> ids;
  for (const CodeLoad* load : loads_) {
    auto id = JitBuildId(JitBuildIdScheme::kSymdex, dump_.header, *load);
    ASSERT_TRUE(id.ok()) << id.status();
    EXPECT_EQ(id->raw().size(), 20u);
    ids.insert(id->ToHex());
  }
  EXPECT_EQ(ids.size(), loads_.size());
}

}  // namespace
}  // namespace symdex::jit
