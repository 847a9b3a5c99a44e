// The BTF reader (ingest/btf.h): hand-made sections for the layout's corners (split strings,
// every kind's trailing bytes, byte order, damage), and a BTF clang wrote, read as bpftool reads
// it.
#include "server/ingest/btf.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <sstream>
#include <string>
#include <vector>

#include "server/debuginfo/files/probe_files.h"
#include "tests/unit/test_util.h"

namespace symdex::ingest {
namespace {

// A BTF section made by hand: types added as (kind, vlen, name) with the trailing bytes their
// kind has, strings interned; Bytes() lays out the header, types and strings.
class BtfBuilder {
 public:
  // `base_strings_len`: a split BTF's names continue after its base's strings.
  explicit BtfBuilder(std::endian order = std::endian::little, uint32_t base_strings_len = 0)
      : order_(order), base_(base_strings_len) {
    if (base_ == 0) strings_.push_back('\0');
  }

  uint32_t Str(const std::string& s) {
    const uint32_t off = base_ + static_cast<uint32_t>(strings_.size());
    strings_ += s;
    strings_.push_back('\0');
    return off;
  }
  void Type(uint32_t kind, uint32_t vlen, uint32_t name_off, size_t trailing) {
    Put(types_, name_off);
    Put(types_, (kind << 24) | vlen);
    Put(types_, 1);
    types_.append(trailing, '\0');
  }
  std::string Bytes() const {
    std::string out;
    Put16(out, 0xeb9f);
    out.push_back(1);  // version
    out.push_back(0);  // flags
    Put(out, 24);
    Put(out, 0);
    Put(out, static_cast<uint32_t>(types_.size()));
    Put(out, static_cast<uint32_t>(types_.size()));
    Put(out, static_cast<uint32_t>(strings_.size()));
    return out + types_ + strings_;
  }
  const std::string& strings() const { return strings_; }

 private:
  void Put(std::string& out, uint32_t v) const {
    for (int i = 0; i < 4; ++i) {
      const int k = order_ == std::endian::little ? i : 3 - i;
      out.push_back(static_cast<char>((v >> (8 * k)) & 0xff));
    }
  }
  void Put16(std::string& out, uint16_t v) const {
    for (int i = 0; i < 2; ++i) {
      const int k = order_ == std::endian::little ? i : 1 - i;
      out.push_back(static_cast<char>((v >> (8 * k)) & 0xff));
    }
  }
  std::endian order_;
  uint32_t base_;
  std::string types_, strings_;
};

// One of each kind before and between two functions: a wrong skip of any would misread the next.
BtfBuilder EveryKind(std::endian order) {
  BtfBuilder b(order);
  b.Type(1, 0, b.Str("int"), 4);         // INT
  b.Type(2, 0, 0, 0);                    // PTR
  b.Type(3, 0, 0, 12);                   // ARRAY
  b.Type(4, 2, b.Str("file"), 24);       // STRUCT, 2 members
  b.Type(5, 1, b.Str("u"), 12);          // UNION
  b.Type(6, 3, b.Str("e"), 24);          // ENUM, 3 values
  b.Type(13, 2, 0, 16);                  // FUNC_PROTO, 2 params
  b.Type(12, 0, b.Str("name_show"), 0);  // FUNC
  b.Type(14, 0, b.Str("v"), 4);          // VAR
  b.Type(15, 2, b.Str(".data"), 24);     // DATASEC
  b.Type(17, 0, b.Str("tag"), 4);        // DECL_TAG
  b.Type(19, 2, b.Str("e64"), 24);       // ENUM64
  for (uint32_t k : {7u, 8u, 9u, 10u, 11u, 16u, 18u}) b.Type(k, 0, 0, 0);
  b.Type(12, 0, b.Str("vfs_read"), 0);  // FUNC
  return b;
}

TEST(BtfTest, ReadsTheFunctionsPastEveryKind) {
  for (std::endian order : {std::endian::little, std::endian::big}) {
    auto r = ReadBtf(EveryKind(order).Bytes());
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->funcs, (std::vector<std::string>{"name_show", "vfs_read"}));
    EXPECT_EQ(r->types, 20u);
  }
}

TEST(BtfTest, ASplitBtfNamesItsBasesStringsAndItsOwn) {
  BtfBuilder base;
  base.Str("name_show");
  const uint32_t in_base = 1;  // "name_show" follows the leading NUL
  BtfBuilder mod(std::endian::little, static_cast<uint32_t>(base.strings().size()));
  mod.Type(12, 0, in_base, 0);
  mod.Type(12, 0, mod.Str("virtblk_probe"), 0);
  auto r = ReadBtf(mod.Bytes(), base.strings());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->funcs, (std::vector<std::string>{"name_show", "virtblk_probe"}));
  // Without its base, the base's names are not there to read.
  EXPECT_FALSE(ReadBtf(mod.Bytes()).ok());
}

TEST(BtfTest, DamageIsAnErrorNotAGuess) {
  const std::string good = EveryKind(std::endian::little).Bytes();
  EXPECT_FALSE(ReadBtf(good.substr(0, 10)).ok());  // no whole header
  std::string magic = good;
  magic[0] = 'x';
  EXPECT_FALSE(ReadBtf(magic).ok());
  std::string version = good;
  version[2] = 2;
  EXPECT_FALSE(ReadBtf(version).ok());
  std::string types_past_end = good;
  types_past_end[12] = static_cast<char>(0xff);  // type_len's low byte
  EXPECT_FALSE(ReadBtf(types_past_end).ok());
  BtfBuilder unknown;
  unknown.Type(31, 0, 0, 0);
  auto r = ReadBtf(unknown.Bytes());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("kind 31"), std::string::npos) << r.status();
  BtfBuilder cut;
  cut.Type(4, 5, 0, 12);  // a struct that claims 5 members and has 1
  EXPECT_FALSE(ReadBtf(cut.Bytes()).ok());
  BtfBuilder nameless;
  nameless.Type(12, 0, 9999, 0);
  EXPECT_FALSE(ReadBtf(nameless.Bytes()).ok());
}

// bpftool's FUNC names of a raw dump ("[id] FUNC 'name' ..."), in order.
std::vector<std::string> BpftoolFuncs(const std::string& out) {
  std::vector<std::string> names;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    const size_t at = line.find("] FUNC '");
    if (at == std::string::npos) continue;
    const size_t from = at + 8, to = line.find('\'', from);
    names.push_back(line.substr(from, to - from));
  }
  return names;
}

// clang -target bpf -g writes BTF for a C file; bpftool, the kernel tree's own reader, lists its
// functions: the same names in the same order.
TEST(BtfTest, ReadsWhatClangWritesAsBpftoolDoes) {
  for (const char* tool : {"clang-14", "bpftool", "llvm-objcopy-14"}) {
    if (testing::RunCommand(std::string("command -v ") + tool + " || test -x /usr/sbin/" + tool).exit_code != 0) {
      GTEST_SKIP() << tool << " is not installed (scripts/setup-deps.sh installs it)";
    }
  }
  testing::TempDir dir;
  testing::WriteFile(dir / "p.c", R"(struct item { int id; const char *name; union { long l; char c[8]; } u; };
enum color { RED, GREEN = 5 };
static __attribute__((noinline)) int name_show(struct item *it, enum color c) { return it->id + c; }
static __attribute__((noinline)) long weigh(const struct item *it, int n[4]) { return it->u.l * n[1]; }
int entry(struct item *it) { int n[4] = {0}; return name_show(it, GREEN) + (int)weigh(it, n); }
)");
  testing::MustRun("clang-14 -target bpf -g -O2 -c " + dir / "p.c" + " -o " + dir / "p.o");
  testing::MustRun("llvm-objcopy-14 --dump-section .BTF=" + dir / "p.btf" + " " + dir / "p.o" + " " + dir / "copy.o");
  const auto dump = testing::RunCommand("PATH=$PATH:/usr/sbin bpftool btf dump file " + dir / "p.btf" + " format raw");
  ASSERT_EQ(dump.exit_code, 0) << dump.err;
  const std::vector<std::string> witness = BpftoolFuncs(dump.out);
  ASSERT_GE(witness.size(), 3u) << dump.out;
  auto r = ReadBtf(testing::Slurp(dir / "p.btf"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->funcs, witness);
}

// The Debian kernel's BTF as the probe-table reader takes it from the debug files: vmlinux's
// (42k functions) and modules' split over it, the same names as bpftool lists.
TEST(BtfCorpusTest, TheDebianKernelsBtfAsBpftoolReadsIt) {
  const std::string vmlinux = testing::DebianDbgCorpusFile("usr/lib/debug/boot/vmlinux-6.1.0-57-cloud-amd64");
  const std::string modules = testing::DebianDbgCorpusFile("usr/lib/debug/lib/modules/6.1.0-57-cloud-amd64/kernel");
  if (vmlinux.empty() || modules.empty()) GTEST_SKIP() << "the Debian -dbg corpus is not fetched";
  if (testing::RunCommand("test -x /usr/sbin/bpftool || command -v bpftool").exit_code != 0) {
    GTEST_SKIP() << "bpftool is not installed (scripts/setup-deps.sh installs it)";
  }
  auto tab = debuginfo::ReadProbeTablesFile(vmlinux);
  ASSERT_TRUE(tab.ok()) << tab.status();
  auto base = ReadBtf(tab->btf);
  ASSERT_TRUE(base.ok()) << base.status();
  const auto dump = testing::RunCommand("PATH=$PATH:/usr/sbin bpftool btf dump file " + vmlinux + " format raw");
  ASSERT_EQ(dump.exit_code, 0) << dump.err;
  EXPECT_EQ(base->funcs, BpftoolFuncs(dump.out));
  EXPECT_GT(base->funcs.size(), 40000u);
  size_t compared = 0;
  for (const char* rel : {"drivers/block/virtio_blk.ko", "drivers/net/virtio_net.ko", "drivers/uio/uio.ko",
                          "drivers/misc/mei/mei.ko", "fs/ext4/ext4.ko"}) {
    const std::string ko = modules + "/" + rel;
    auto mt = debuginfo::ReadProbeTablesFile(ko);
    if (!mt.ok()) continue;  // not in this flavour
    auto m = ReadBtf(mt->btf, base->strings);
    ASSERT_TRUE(m.ok()) << ko << ": " << m.status();
    const auto md =
        testing::RunCommand("PATH=$PATH:/usr/sbin bpftool -B " + vmlinux + " btf dump file " + ko + " format raw");
    ASSERT_EQ(md.exit_code, 0) << md.err;
    EXPECT_EQ(m->funcs, BpftoolFuncs(md.out)) << ko;
    EXPECT_FALSE(m->funcs.empty()) << ko;
    ++compared;
  }
  EXPECT_GE(compared, 3u);
}

}  // namespace
}  // namespace symdex::ingest
