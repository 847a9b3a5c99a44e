// Arguments by name compiled from real DWARF (debuginfo/dwarf/fetch_args.h through the
// symbolizer): a program compiled here by gcc -O2, DWARF 4 and 5, probed at a function's entry.
// The expected fetch args are what x86-64's ABI and the structs' layout give (and what
// `perf probe -x BIN -D` prints for the same arguments, except the bitfields: perf 6.1 writes
// DWARF 4's big-endian bit offset where the kernel counts from the least significant bit, and
// finds no offset at all in DWARF 5's DW_AT_data_bit_offset).
#include "server/debuginfo/dwarf/fetch_args.h"

#include <elf.h>
#include <gtest/gtest.h>

#include <set>

#include "server/common/kernel_arch.h"
#include "server/common/strings.h"
#include "server/debuginfo/symbolize/symbolizer.h"
#include "tests/unit/test_util.h"

namespace symdex::debuginfo {
namespace {

using symdex::testing::MustRun;
using symdex::testing::NmValue;
using symdex::testing::TempDir;
using symdex::testing::WriteFile;

constexpr char kSource[] = R"(
struct inner { int a; unsigned flags:3; unsigned mode:5; union { long u; char tag[8]; }; };
struct outer { char name[16]; struct inner in; struct inner *next; const char *label; };
long sink;
__attribute__((noinline)) long probe_me(struct outer *o, int n, const char *s) {
  long r = 0;
  for (int i = 0; i < n; i++) r += o->in.a + s[i];
  sink = r;
  return r + o->next->u;
}
long folded(long x);
int main(int c, char **v) { struct outer o = {0}; o.next = &o.in; return (int)probe_me(&o, c, v[0]) + folded(c); }
__attribute__((noinline)) long folded(long x) { const long k = 7; return x * k; }
static inline __attribute__((always_inline)) long scaled(const char *s, long v) { long r = s[0] * v; sink = r; return r + s[1] * v; }
__attribute__((noinline)) long caller_of(const char *s, long v) { sink += v; return scaled(s, v) + 1; }
)";

class FetchArgsTest : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    const std::string src = dir_ / "t.c";
    WriteFile(src, kSource);
    bin_ = dir_ / "t";
    MustRun(StrCat("gcc -O2 -g -gdwarf-", GetParam(), " -o '", bin_, "' '", src, "'"));
    symbol_ = NmValue(bin_, "probe_me");
    ctx_.arch = ArchOfMachine(EM_X86_64);
  }
  absl::StatusOr<CompiledArgs> Compile(std::vector<std::string> texts, uint64_t offset = 0, bool ret = false) {
    std::vector<ingest::ProbeArg> args;
    for (const auto& t : texts) {
      auto a = ingest::ParseProbeArg(t);
      if (!a.ok()) return a.status();
      args.push_back(*a);
    }
    Symbolizer::CopyAt at{.symbol = symbol_, .offset = offset, .ret = ret, .dwarf_name = "probe_me"};
    return sym_.FetchArgs(bin_, at, args, ctx_);
  }
  TempDir dir_;
  std::string bin_;
  uint64_t symbol_ = 0;
  FetchContext ctx_;
  Symbolizer sym_;
};

TEST_P(FetchArgsTest, MembersStringsIndexesAndBitfieldsAtTheEntry) {
  auto c = Compile({"o->name:string", "o->in.flags", "o->in.mode", "o->in.tag[1]", "o->next->u", "o->label:string",
                    "s:string", "n", "$params", "cnt=n:u16", "%ax"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->fetchargs, (std::vector<std::string>{
                              "name=+0(%di):string",     // a char array in memory: its address
                              "flags=+20(%di):b3@0/32",  // struct inner at +16, its word at +4: bits 0-2
                              "mode=+20(%di):b5@3/32",   // bits 3-7 of the same word
                              "tag=+25(%di):s8",         // the anonymous union at +8 of inner, [1]
                              "u=+8(+32(%di)):s64",      // o->next (at +32), then u at +8
                              "label=+0(+40(%di)):string",
                              "s_string=+0(%dx):string",
                              "n=%si:s32",
                              "o=%di:x64",
                              "n=%si:s32",
                              "s=%dx:x64",
                              "cnt=%si:u16",
                              "%ax",
                          }));
}

TEST_P(FetchArgsTest, WhatCannotBeFetchedThereIsRefusedSayingWhere) {
  // r is the constant 0 at the entry (DW_OP_lit0; DW_OP_stack_value): an immediate.
  auto zero = Compile({"r"});
  ASSERT_TRUE(zero.ok()) << zero.status();
  EXPECT_EQ(zero->fetchargs, std::vector<std::string>{"r=\\0:s64"});
  // i, the loop's counter, has no location inside the loop past its first instructions (gcc
  // counts with a pointer there): refused as out of range, saying where it has one.
  auto local = Compile({"i"}, 0x20);
  ASSERT_FALSE(local.ok());
  EXPECT_EQ(local.status().code(), absl::StatusCode::kOutOfRange) << local.status();
  EXPECT_NE(std::string(local.status().message()).find("'i' cannot be fetched at probe_me+0x20"), std::string::npos)
      << local.status();
  EXPECT_NE(std::string(local.status().message()).find("it can be fetched at +0x0.."), std::string::npos)
      << local.status();
  for (const auto& [arg, why] : std::vector<std::pair<std::string, std::string>>{
           {"nosuch", "no variable 'nosuch' in scope in probe_me"},
           {"o->nosuch", "has no member 'nosuch'"},
           {"o.name", "use '->name'"},
           {"o->in->a", "use '.a'"},
           {"n:string", "not a char pointer or array"},
           {"n->x", "not a pointer"},
           {"n[1]", "not an array or a pointer"},
       }) {
    auto r = Compile({arg});
    ASSERT_FALSE(r.ok()) << arg;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << arg << ": " << r.status();
    EXPECT_NE(std::string(r.status().message()).find(why), std::string::npos) << arg << ": " << r.status();
  }
  // A return probe fetches $retval only.
  auto ret = Compile({"$retval", "rv=$retval:s64"}, 0, true);
  ASSERT_TRUE(ret.ok()) << ret.status();
  EXPECT_EQ(ret->fetchargs, (std::vector<std::string>{"$retval", "rv=$retval:s64"}));
  EXPECT_FALSE(Compile({"n"}, 0, true).ok());
  EXPECT_FALSE(Compile({"$retval"}).ok());
}

TEST_P(FetchArgsTest, TheScopesVariablesAndWhereEachHasALocation) {
  Symbolizer::CopyAt at{.symbol = symbol_, .dwarf_name = "probe_me"};
  auto vars = sym_.Variables(bin_, at, ctx_);
  ASSERT_TRUE(vars.ok()) << vars.status();
  ASSERT_GE(vars->size(), 4u);
  EXPECT_EQ((*vars)[0].name, "o");
  EXPECT_EQ((*vars)[0].type, "struct outer *");
  EXPECT_TRUE((*vars)[0].parameter);
  EXPECT_TRUE((*vars)[0].here);
  EXPECT_EQ((*vars)[0].fetch, "%di:x64");
  EXPECT_EQ((*vars)[2].type, "const char *");
  const ScopeVariable& r = (*vars)[3];
  EXPECT_EQ(r.name, "r");
  EXPECT_FALSE(r.parameter);
  // A function's other copy does not answer for this one: a wrong name is refused.
  Symbolizer::CopyAt wrong{.symbol = symbol_, .dwarf_name = "main"};
  EXPECT_FALSE(sym_.Variables(bin_, wrong, ctx_).ok());
}

// Lines of the body (body_lines.h): probe_me is declared on line 5; line 8 is `sink = r;`.
TEST_P(FetchArgsTest, ALineOfTheBodyHasItsPlacesEachWithItsOwnFetches) {
  Symbolizer::CopyAt at{.symbol = symbol_, .dwarf_name = "probe_me"};
  auto places = sym_.BodyLines(bin_, at, 3, /*relative=*/true, ctx_);
  ASSERT_TRUE(places.ok()) << places.status();
  EXPECT_EQ(places->decl_line, 5);
  EXPECT_EQ(places->line, 8);
  EXPECT_TRUE(places->file.ends_with("t.c")) << places->file;
  // gcc splits the line: after the loop, and where n <= 0 skipped it (there r is the constant 0).
  ASSERT_GE(places->pcs.size(), 2u);
  std::set<std::string> fetches;
  for (uint64_t off : places->pcs) {
    EXPECT_GT(off, 0u);  // inside the body, past the entry
    // r is what line 8 stores: known at each place, where at the entry it is not.
    auto c = Compile({"r"}, off);
    ASSERT_TRUE(c.ok()) << "+" << off << ": " << c.status();
    fetches.insert(c->fetchargs[0].substr(0, 3));
  }
  EXPECT_EQ(fetches, (std::set<std::string>{"r=%", "r=\\"}));
  // The same line asked for absolutely.
  auto absolute = sym_.BodyLines(bin_, at, 8, /*relative=*/false, ctx_);
  ASSERT_TRUE(absolute.ok()) << absolute.status();
  EXPECT_EQ(absolute->pcs, places->pcs);
  // Line 0 relative is the declaration: the entry.
  auto entry = sym_.BodyLines(bin_, at, 0, /*relative=*/true, ctx_);
  ASSERT_TRUE(entry.ok()) << entry.status();
  EXPECT_EQ(entry->pcs, std::vector<Dwarf_Addr>{0});
  // A line past the function, and one before it: refused, naming the lines that have code.
  for (int line : {40, 2}) {
    auto out = sym_.BodyLines(bin_, at, line, /*relative=*/false, ctx_);
    ASSERT_FALSE(out.ok()) << line;
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(std::string(out.status().message()).find("is outside this copy"), std::string::npos) << out.status();
    EXPECT_NE(std::string(out.status().message()).find("the nearest lines with code"), std::string::npos);
  }
}

// A variable the compiler folded into the code (DW_AT_const_value) is fetched as kprobe_events'
// immediate, as perf does; it has nothing in memory to look into.
TEST_P(FetchArgsTest, AFoldedConstantIsAnImmediate) {
  Symbolizer::CopyAt at{.symbol = NmValue(bin_, "folded"), .dwarf_name = "folded"};
  auto c = sym_.FetchArgs(bin_, at, {*ingest::ParseProbeArg("k"), *ingest::ParseProbeArg("x")}, ctx_);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->fetchargs, (std::vector<std::string>{"k=\\7:s64", "x=%di:s64"}));
  auto member = sym_.FetchArgs(bin_, at, {*ingest::ParseProbeArg("k->x")}, ctx_);
  ASSERT_FALSE(member.ok());
  EXPECT_EQ(member.status().code(), absl::StatusCode::kOutOfRange) << member.status();
}

// An inlined copy (CopyAt::inlined): its parameters as they are in that copy, its frame the
// function holding it; no copy of that name at an address outside it.
TEST_P(FetchArgsTest, AnInlinedCopyFetchesItsOwnParameters) {
  const uint64_t caller = NmValue(bin_, "caller_of");
  std::optional<uint64_t> first;
  for (uint64_t off = 0; off < 64 && !first; ++off) {
    Symbolizer::CopyAt at{.symbol = caller, .offset = off, .dwarf_name = "caller_of", .inlined = "scaled"};
    auto c = sym_.FetchArgs(bin_, at, {*ingest::ParseProbeArg("s")}, ctx_);
    if (c.ok() || c.status().code() != absl::StatusCode::kNotFound) first = off;
  }
  ASSERT_TRUE(first) << "no copy of scaled found in caller_of";
  EXPECT_GT(*first, 0u);  // past `sink += v`
  Symbolizer::CopyAt at{.symbol = caller, .offset = *first, .dwarf_name = "caller_of", .inlined = "scaled"};
  auto c = sym_.FetchArgs(bin_, at, {*ingest::ParseProbeArg("s"), *ingest::ParseProbeArg("s[0]")}, ctx_);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->fetchargs.size(), 2u);
  EXPECT_TRUE(c->fetchargs[0].starts_with("s=%")) << c->fetchargs[0];
  EXPECT_NE(c->fetchargs[1].find("=+0(%"), std::string::npos) << c->fetchargs[1];  // the char s points at
  // A name only the copy's holder has is not in the copy's scope; the message names both.
  auto other = sym_.FetchArgs(bin_, at, {*ingest::ParseProbeArg("nosuch")}, ctx_);
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(other.status().message()).find("in scope in scaled at caller_of+0x"), std::string::npos)
      << other.status();
  auto decl = sym_.InlinedDeclFile(bin_, at, ctx_);
  ASSERT_TRUE(decl.ok()) << decl.status();
  EXPECT_TRUE(decl->ends_with("t.c")) << *decl;
  // At the holder's entry no copy of scaled holds the address.
  Symbolizer::CopyAt entry{.symbol = caller, .dwarf_name = "caller_of", .inlined = "scaled"};
  auto none = sym_.FetchArgs(bin_, entry, {*ingest::ParseProbeArg("s")}, ctx_);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), absl::StatusCode::kNotFound) << none.status();
}

INSTANTIATE_TEST_SUITE_P(Dwarf, FetchArgsTest, ::testing::Values(4, 5),
                         [](const auto& info) { return StrCat("dwarf", info.param); });

}  // namespace
}  // namespace symdex::debuginfo
