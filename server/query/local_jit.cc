// The JIT and build-ID verbs' Check and Local (verbs.h): query/jit_query.h on a pooled connection
// (each lookup runs in its own read snapshot there).
#include "server/common/strings.h"
#include "server/query/jit_query.h"
#include "server/query/local_query_impl.h"

namespace symdex::query {

namespace {
absl::Status CheckListSize(size_t n, std::string_view what) {
  if (n <= kMaxAddressesPerRequest) return absl::OkStatus();
  return absl::InvalidArgumentError(StrCat(n, " ", what, "; the limit is ", kMaxAddressesPerRequest));
}
}  // namespace

absl::Status JitAddr::Check(const JitAddrRequest& r) { return CheckListSize(r.addresses.size(), "addresses"); }

absl::StatusOr<JitAddrAnswer> JitAddr::Local(LocalQuery& q, const JitAddrRequest& r) {
  return q.OnConnection([&](store::Db& db) { return query::JitAddresses(db, r); });
}

absl::Status JitCollisions::Check(const JitCollisionsRequest& r) {
  if (!r.scheme.empty()) RETURN_IF_ERROR(JitSchemeArg(r.scheme, 40).status());
  return absl::OkStatus();
}

absl::StatusOr<JitCollisionsAnswer> JitCollisions::Local(LocalQuery& q, const JitCollisionsRequest& r) {
  std::optional<std::string> scheme;
  if (!r.scheme.empty()) scheme = r.scheme;
  return q.OnConnection([&](store::Db& db) -> absl::StatusOr<JitCollisionsAnswer> {
    JitCollisionsAnswer out;
    ASSIGN_OR_RETURN(out.collisions, query::JitCollisionGroups(db, scheme));
    ASSIGN_OR_RETURN(out.counts, query::JitSchemeCounts(db, scheme));
    return out;
  });
}

absl::Status MatchJittedDsos::Check(const MatchDsosRequest& r) {
  RETURN_IF_ERROR(CheckListSize(r.dsos.size(), "DSOs"));
  for (const auto& d : r.dsos) {
    RETURN_IF_ERROR(CheckFieldSize("build_id", d.build_id, kMaxBuildIdHexLength));
    RETURN_IF_ERROR(CheckFieldSize("symbol", d.symbol, kMaxSymbolNameLength));
  }
  return absl::OkStatus();
}

absl::StatusOr<MatchDsosAnswer> MatchJittedDsos::Local(LocalQuery& q, const MatchDsosRequest& r) {
  return q.OnConnection([&](store::Db& db) -> absl::StatusOr<MatchDsosAnswer> {
    JittedDsoMatcher matcher(db);
    MatchDsosAnswer out;
    out.matches.reserve(r.dsos.size());
    for (const auto& d : r.dsos) {
      ASSIGN_OR_RETURN(auto m, matcher.Match(d));
      out.matches.push_back(std::move(m));
    }
    return out;
  });
}

absl::Status LookupBuildId::Check(const BuildIdRequest& r) {
  return CheckFieldSize("build_id", r.build_id, kMaxBuildIdHexLength);
}

absl::StatusOr<BuildIdAnswer> LookupBuildId::Local(LocalQuery& q, const BuildIdRequest& r) {
  return q.BuildIdHits(r.build_id, r.jitted, kQuoteInFull);
}

absl::StatusOr<BuildIdAnswer> LocalQuery::BuildIdHits(const std::string& hex, bool include_jitted, size_t quote_max) {
  ASSIGN_OR_RETURN(auto lease, Acquire());
  return LookupBuildId(lease->db, hex, include_jitted, quote_max);
}

}  // namespace symdex::query
