// The verbs of server/query/verbs.h on the wire: each one's request and answer fit its RPC's
// messages field for field (what the daemon checks before serving), every field of an answer
// reaches the message and comes back, and a field the proto does not have is named.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <tuple>

#include "server/api/methods.h"
#include "server/api/wire_fields.h"
#include "server/query/api.h"
#include "server/query/verbs.h"

namespace symdex {
namespace {

namespace gp = google::protobuf;

TEST(VerbWireTest, EveryVerbFitsItsRpc) {
  const gp::FileDescriptor* file = api::pb::ResolveRequest::descriptor()->file();
  size_t verbs = 0;
  query::Verbs::ForEach([&]<class V>(std::type_identity<V>) {
    ++verbs;
    const gp::ServiceDescriptor* s = file->FindServiceByName(query::ServiceOf<V>());
    ASSERT_NE(s, nullptr) << query::ServiceOf<V>();
    const gp::MethodDescriptor* m = s->FindMethodByName(V::kMethod);
    ASSERT_NE(m, nullptr) << V::kMethod;
    EXPECT_EQ(api::CheckWire<typename V::Request>(m->input_type()), "") << V::kMethod;
    EXPECT_EQ(api::CheckWire<api::WireAnswer<V>>(m->output_type()), "") << V::kMethod;
    const api::VerbWire& w = api::WireOf<V>();
    EXPECT_EQ(w.path, std::string("/symdex.v1.") + query::ServiceOf<V>() + "/" + V::kMethod);
    EXPECT_EQ(w.request->GetDescriptor(), m->input_type());
  });
  EXPECT_EQ(verbs, query::Verbs::kCount);
}

// Every RPC of symdex.v1's services is in the daemon's method list exactly once — a declared verb
// or a hand-written handler's entry — and the list names no RPC the proto lacks: the texts made
// from it (the heavy calls) cannot leave one out.
TEST(VerbWireTest, TheMethodListIsTheProtosRpcs) {
  const gp::FileDescriptor* file = api::pb::ResolveRequest::descriptor()->file();
  std::set<std::string> proto;
  for (int i = 0; i < file->service_count(); ++i) {
    const gp::ServiceDescriptor* s = file->service(i);
    for (int k = 0; k < s->method_count(); ++k) proto.insert(s->name() + "." + s->method(k)->name());
  }
  ASSERT_GT(proto.size(), 20u) << "the proto's services are read (SymbolService's 19, JitService's 4)";
  std::map<std::string, int> listed;
  std::set<std::string> labels;
  size_t declared = 0;
  for (const api::Method& m : api::AllMethods()) {
    ++listed[std::string(m.service) + "." + m.rpc];
    EXPECT_TRUE(labels.insert(m.label).second) << "label " << m.label << " twice";
    if (m.declared) ++declared;
  }
  size_t streams = 0;  // a verb's bidi stream is declared with it
  query::Verbs::ForEach([&]<class V>(std::type_identity<V>) {
    if constexpr (requires { V::kStreamMethod; }) ++streams;
  });
  EXPECT_EQ(declared, query::Verbs::kCount + streams);
  // Every RPC is a declared verb but the one write: reading files into the index on the daemon's
  // host.
  for (const api::Method& m : api::AllMethods()) {
    EXPECT_TRUE(m.declared || api::NameOf(m) == "JitService.Ingest") << api::NameOf(m) << " has a handler of its own";
  }
  for (const std::string& rpc : proto) EXPECT_EQ(listed[rpc], 1) << rpc;
  for (const auto& [rpc, n] : listed) EXPECT_TRUE(proto.count(rpc)) << rpc << " is no RPC of the proto";
  // A declared verb's traits are its declaration's.
  query::Verbs::ForEach([&]<class V>(std::type_identity<V>) {
    bool found = false;
    for (const api::Method& m : api::AllMethods()) {
      if (m.declared && std::string(m.rpc) == V::kMethod) {
        found = true;
        EXPECT_EQ(m.heavy, V::kHeavy) << V::kMethod;
      }
    }
    EXPECT_TRUE(found) << V::kMethod;
  });
  // The heavy-call text names each heavy method, and no other.
  const std::string heavy = api::HeavyMethodNames();
  for (const api::Method& m : api::AllMethods()) {
    const bool named = (", " + heavy + ",").find(", " + api::NameOf(m) + ",") != std::string::npos;
    EXPECT_EQ(named, m.heavy) << api::NameOf(m) << " in \"" << heavy << "\"";
  }
}

query::InlinedAnswer FullAnswer() {
  query::InlinedAnswer a;
  a.target.name = "debian";
  a.target.kind = "offline";
  a.target.release = "6.1.0-57-cloud-amd64";
  a.target.build_id = "ab12";
  a.target.text_addr = 0xffffffff81000000;
  a.name = "memcpy_from_page";
  query::InlinedSite s;
  query::Instance in;
  in.name = "verify_page";
  in.type = 't';
  in.addr = 0xffffffff813c6580;
  in.text_offset = 3958144;
  in.size = 1824;
  in.verdict.kind = query::Probeability::kTraceable;
  in.verdict.kprobe = in.verdict.ftrace = true;
  s.caller = in;
  s.offset = 0x230;
  s.file = "fs/verity/verify.c";
  s.line = 122;
  s.column = 4;
  s.inlined_into = "verify_page";
  s.depth = 2;
  a.sites.push_back(s);
  a.sites.push_back(query::InlinedSite{.offset = 7, .file = "x.c", .line = 1});  // no caller
  a.notes = {"one", "two"};
  return a;
}

TEST(VerbWireTest, EveryFieldOfAnAnswerGoesOutAndComesBack) {
  const query::InlinedAnswer a = FullAnswer();
  api::pb::InlinedResponse m;
  api::ToWire(a, &m);
  // Every field of the message is set: nothing of the answer stayed behind.
  std::vector<const gp::FieldDescriptor*> set;
  m.GetReflection()->ListFields(m, &set);
  EXPECT_EQ(set.size(), static_cast<size_t>(m.GetDescriptor()->field_count()));
  const api::pb::InlinedSite& site = m.sites(0);
  site.GetReflection()->ListFields(site, &set);
  EXPECT_EQ(set.size(), static_cast<size_t>(site.GetDescriptor()->field_count()));
  EXPECT_EQ(site.caller().name(), "verify_page");
  EXPECT_FALSE(m.sites(1).has_caller());

  query::InlinedAnswer back;
  api::FromWire(m, &back);
  EXPECT_EQ(back.target.name, a.target.name);
  EXPECT_EQ(back.target.text_addr, a.target.text_addr);
  EXPECT_EQ(back.name, a.name);
  EXPECT_EQ(back.notes, a.notes);
  ASSERT_EQ(back.sites.size(), 2u);
  ASSERT_TRUE(back.sites[0].caller.has_value());
  EXPECT_EQ(back.sites[0].caller->name, "verify_page");
  EXPECT_EQ(back.sites[0].caller->addr, a.sites[0].caller->addr);
  EXPECT_EQ(back.sites[0].caller->verdict.kind, query::Probeability::kTraceable);
  EXPECT_EQ(back.sites[0].offset, 0x230u);
  EXPECT_EQ(back.sites[0].file, "fs/verity/verify.c");
  EXPECT_EQ(back.sites[0].line, 122);
  EXPECT_EQ(back.sites[0].column, 4);
  EXPECT_EQ(back.sites[0].inlined_into, "verify_page");
  EXPECT_EQ(back.sites[0].depth, 2u);
  EXPECT_FALSE(back.sites[1].caller.has_value());
  // And once more: the same bytes.
  api::pb::InlinedResponse again;
  api::ToWire(back, &again);
  EXPECT_EQ(again.SerializeAsString(), m.SerializeAsString());
}

// The older answers carry the target twice: its name in `target`, the whole in `target_info`.
TEST(VerbWireTest, ATargetOnAStringFieldIsTheNameWithTheWholeBeside) {
  query::LinesAnswer a;
  a.target.name = "host";
  a.target.kind = "live";
  a.target.text_addr = 0xffffffff81000000;
  query::LineAddress x;
  x.address = 0xffffffff811e6615;
  x.symbol = query::Instance{.name = "vfs_read", .type = 'T', .addr = 0xffffffff811e6600, .text_offset = 0x1e6600};
  x.offset = 0x15;
  x.frames = {{"rw_verify_area", "fs/read_write.c", 357, 9}, {"vfs_read", "fs/read_write.c", 452, 8}};
  x.note = "n";
  a.addresses = {x, query::LineAddress{.address = 0x10}};
  api::pb::LinesResponse m;
  api::ToWire(a, &m);
  EXPECT_EQ(m.target(), "host");
  EXPECT_EQ(m.target_info().name(), "host");
  EXPECT_EQ(m.target_info().kind(), "live");
  ASSERT_EQ(m.addresses_size(), 2);
  EXPECT_EQ(m.addresses(0).frames(1).function(), "vfs_read");
  EXPECT_EQ(m.addresses(0).frames(0).column(), 9);
  EXPECT_FALSE(m.addresses(1).has_symbol());

  query::LinesAnswer back;
  api::FromWire(m, &back);
  EXPECT_EQ(back.target.name, "host");
  EXPECT_EQ(back.target.text_addr, a.target.text_addr);
  ASSERT_EQ(back.addresses.size(), 2u);
  EXPECT_EQ(back.addresses[0].address, x.address);
  EXPECT_EQ(back.addresses[0].symbol->text_offset, x.symbol->text_offset);
  EXPECT_EQ(back.addresses[0].frames, x.frames);
  EXPECT_EQ(back.addresses[0].note, "n");
  EXPECT_FALSE(back.addresses[1].symbol.has_value());

  // A string `target` with nothing to carry the whole beside it is named.
  EXPECT_NE(api::CheckWire<query::LinesAnswer>(api::pb::WhichRequest::descriptor()).find("no Target target_info"),
            std::string::npos);
}

// A request with a field its message lacks, one of another kind, and a list the proto has as
// one value.
struct Mismatched {
  std::string target;
  std::string nowhere;
  std::vector<std::string> name;
  SYMDEX_FIELDS(Mismatched, target, nowhere, name)
};

TEST(VerbWireTest, AFieldTheProtoLacksIsNamed) {
  const std::string problems = api::CheckWire<Mismatched>(api::pb::InlinedRequest::descriptor());
  EXPECT_NE(problems.find("symdex.v1.InlinedRequest.nowhere: no such field"), std::string::npos) << problems;
  EXPECT_NE(problems.find("symdex.v1.InlinedRequest.name: a list"), std::string::npos) << problems;
  EXPECT_EQ(problems.find(".target"), std::string::npos) << problems;
}

}  // namespace
// A proto map carries a std::map field: its entries go out and come back, and a field that is no
// map is named.
TEST(VerbWireTest, AMapGoesOutAsEntriesAndComesBack) {
  query::JitCollisionsAnswer a;
  a.counts["sha1-code"] = {.loads = 3, .distinct_ids = 2};
  a.counts["symdex"] = {.loads = 1, .distinct_ids = 1};
  query::JitCollision c{.scheme = "sha1-code", .build_id = "ab", .distinct_names = 2};
  c.loads.push_back(query::JitFunction{.pid = 7, .code_index = 3, .name = "LazyCompile:f"});
  a.collisions.push_back(c);
  api::pb::JitCollisionsResponse m;
  api::ToWire(a, &m);
  ASSERT_EQ(m.counts_size(), 2);
  EXPECT_EQ(m.counts().at("sha1-code").loads(), 3);
  EXPECT_EQ(m.counts().at("sha1-code").distinct_ids(), 2);
  ASSERT_EQ(m.collisions_size(), 1);
  EXPECT_EQ(m.collisions(0).loads(0).dso(), "jitted-7-3.so");

  query::JitCollisionsAnswer back;
  api::FromWire(m, &back);
  ASSERT_EQ(back.counts.size(), 2u);
  EXPECT_EQ(back.counts["symdex"].loads, 1);
  EXPECT_EQ(back.counts["sha1-code"].distinct_ids, 2);
  ASSERT_EQ(back.collisions.size(), 1u);
  EXPECT_EQ(back.collisions[0].loads[0].name, "LazyCompile:f");
  EXPECT_EQ(back.collisions[0].distinct_names, 2u);

  struct NotAMap {
    std::map<std::string, query::JitSchemeCount> collisions;
    SYMDEX_FIELDS(NotAMap, collisions)
  };
  EXPECT_NE(api::CheckWire<NotAMap>(api::pb::JitCollisionsResponse::descriptor()).find("a map, the field is not one"),
            std::string::npos);
}

// A hand-converted JIT record's parts that have field lists go by them: a load's process instance
// and a perf-map symbol fit their messages, and an answer holding both comes back whole.
TEST(VerbWireTest, AJitLoadsInstanceAndAPerfMapSymbolGoByTheirFieldLists) {
  EXPECT_EQ(api::CheckWire<query::JitInstanceInfo>(api::pb::JitInstance::descriptor()), "");
  EXPECT_EQ(api::CheckWire<query::PerfMapSymbol>(api::pb::PerfMapSymbol::descriptor()), "");
  // An address the jitdump covers: its load, with the process instance.
  query::JitAddrResult r{.address = 0x7f00};
  r.function = query::JitFunction{.pid = 7, .code_index = 3, .name = "LazyCompile:f"};
  r.function->instance = query::JitInstanceInfo{.id = 5,
                                                .pid = 7,
                                                .dump_timestamp = 99,
                                                .elf_mach = 62,
                                                .big_endian = true,
                                                .path = "/tmp/jit-7.dump",
                                                .status = "complete",
                                                .loads = 12};
  api::pb::JitAddrResult m;
  api::ToWire(r, &m);
  EXPECT_EQ(m.load().instance().path(), "/tmp/jit-7.dump");
  EXPECT_EQ(m.load().instance().elf_mach(), 62u);
  query::JitAddrResult back;
  api::FromWire(m, &back);
  ASSERT_TRUE(back.function);
  const query::JitInstanceInfo& i = back.function->instance;
  EXPECT_EQ(std::tie(i.id, i.pid, i.dump_timestamp, i.elf_mach, i.big_endian, i.path, i.status, i.loads),
            std::make_tuple(int64_t{5}, uint32_t{7}, uint64_t{99}, uint32_t{62}, true, std::string("/tmp/jit-7.dump"),
                            std::string("complete"), int64_t{12}));
  EXPECT_FALSE(back.perf_map);
  // One only the perf map names.
  query::JitAddrResult p{.address = 0x7f10};
  p.perf_map = query::PerfMapSymbol{"/tmp/perf-7.map", 41, 0x7f00, 0x40, "f"};
  api::pb::JitAddrResult pm;
  api::ToWire(p, &pm);
  EXPECT_EQ(pm.perf_map().map_line(), 41u);
  EXPECT_EQ(pm.perf_map_symbol(), "f");
  query::JitAddrResult pback;
  api::FromWire(pm, &pback);
  EXPECT_FALSE(pback.function);
  ASSERT_TRUE(pback.perf_map);
  EXPECT_EQ(
      std::tie(pback.perf_map->map_path, pback.perf_map->map_line, pback.perf_map->start, pback.perf_map->size,
               pback.perf_map->name),
      std::make_tuple(std::string("/tmp/perf-7.map"), size_t{41}, uint64_t{0x7f00}, uint64_t{0x40}, std::string("f")));
}

// An implementation that records the requests it is asked, answering each address with itself.
class Recorder : public query::QueryApi {
 public:
  std::vector<size_t> sizes;
  absl::StatusOr<query::AnyAnswer> Call(const query::AnyRequest& r) override {
    const auto* req = std::get_if<query::JitAddrRequest>(&r);
    if (req == nullptr) return absl::UnimplementedError("");
    RETURN_IF_ERROR(query::JitAddr::Check(*req));
    sizes.push_back(req->addresses.size());
    query::JitAddrAnswer a;
    a.instance = query::JitInstanceInfo{.pid = req->pid, .loads = static_cast<int64_t>(sizes.size())};
    for (uint64_t x : req->addresses) a.results.push_back({.address = x});
    return query::AnyAnswer(std::in_place_type<query::JitAddrAnswer>, std::move(a));
  }
};

// A list longer than one request may carry is asked in parts, the answers merged in order; the
// whole request as it is is refused by the verb's Check.
TEST(VerbWireTest, AListPastTheRequestLimitIsAskedInParts) {
  Recorder api;
  query::JitAddrRequest req{.pid = 42};
  for (uint64_t i = 0; i < 2 * query::kMaxAddressesPerRequest + 5; ++i) req.addresses.push_back(i);
  auto a = api.Ask<query::JitAddr>(req);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(api.sizes, (std::vector<size_t>{query::kMaxAddressesPerRequest, query::kMaxAddressesPerRequest, 5}));
  ASSERT_EQ(a->results.size(), req.addresses.size());
  for (size_t i = 0; i < a->results.size(); ++i) ASSERT_EQ(a->results[i].address, i);
  EXPECT_EQ(a->instance->loads, 3);  // the last part's

  api.sizes.clear();
  auto whole = api.AskWhole<query::JitAddr>(req);
  EXPECT_EQ(whole.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(whole.status().message(), "131077 addresses; the limit is 65536");
  EXPECT_TRUE(api.sizes.empty());
}

}  // namespace symdex
