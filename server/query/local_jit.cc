// LocalQuery's JIT and build-ID answers: query/jit_query.h on a pooled connection (each lookup
// runs in its own read snapshot there).
#include "server/common/strings.h"
#include "server/query/jit_query.h"
#include "server/query/local_query_impl.h"

namespace symdex::query {

absl::StatusOr<JitAddrAnswer> LocalQuery::JitAddr(const JitAddrRequest& req) {
  ASSIGN_OR_RETURN(auto lease, Acquire());
  return query::JitAddr(lease->db, req);
}

absl::StatusOr<JitCollisionsAnswer> LocalQuery::JitCollisions(const std::optional<std::string>& scheme) {
  if (scheme) RETURN_IF_ERROR(JitSchemeArg(*scheme, 40).status());
  ASSIGN_OR_RETURN(auto lease, Acquire());
  JitCollisionsAnswer out;
  ASSIGN_OR_RETURN(out.collisions, query::JitCollisions(lease->db, scheme));
  ASSIGN_OR_RETURN(out.counts, query::JitSchemeCounts(lease->db, scheme));
  return out;
}

absl::StatusOr<std::vector<DsoMatch>> LocalQuery::MatchJittedDsos(const std::vector<JittedDsoKey>& dsos) {
  ASSIGN_OR_RETURN(auto lease, Acquire());
  JittedDsoMatcher matcher(lease->db);
  std::vector<DsoMatch> out;
  out.reserve(dsos.size());
  for (const auto& d : dsos) {
    ASSIGN_OR_RETURN(auto m, matcher.Match(d));
    out.push_back(std::move(m));
  }
  return out;
}

absl::Status LookupBuildId::Check(const BuildIdRequest& r) {
  return CheckFieldSize("build_id", r.build_id, kMaxBuildIdHexLength);
}

absl::StatusOr<BuildIdAnswer> LookupBuildId::Local(LocalQuery& q, const BuildIdRequest& r) {
  return q.BuildIdHits(r.build_id, /*include_jitted=*/true, kQuoteInFull);
}

absl::StatusOr<BuildIdAnswer> LocalQuery::BuildIdHits(const std::string& hex, bool include_jitted, size_t quote_max) {
  ASSIGN_OR_RETURN(auto lease, Acquire());
  return LookupBuildId(lease->db, hex, include_jitted, quote_max);
}

}  // namespace symdex::query
