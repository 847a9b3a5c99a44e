#include "server/api/router.h"

#include "server/fleet/kernel_cache.h"
#include "server/query/symbol_query.h"

namespace symdex::api {

namespace {
thread_local bool t_counted_elsewhere = false;

std::vector<ModuleByBuildId> WithBuildIds(const std::vector<query::FrameModule>& modules) {
  std::vector<ModuleByBuildId> mods;
  for (const query::FrameModule& m : modules) {
    if (!m.build_id.empty()) mods.push_back({m.name, m.build_id});
  }
  return mods;
}
}  // namespace

QueryRouter::CountedElsewhere::CountedElsewhere() { t_counted_elsewhere = true; }
QueryRouter::CountedElsewhere::~CountedElsewhere() { t_counted_elsewhere = false; }

Routed QueryRouter::Route(const std::string& target, const std::vector<query::FrameModule>& modules) const {
  if (kernels_ == nullptr || !target.starts_with(query::kBuildIdTargetPrefix)) return {};
  // Indexed here already (symdex index --build-id into the daemon's own index): answered from it.
  if (own_.Target(target).ok()) return {};
  return {target.substr(query::kBuildIdTargetPrefix.size()), WithBuildIds(modules)};
}

bool QueryRouter::WouldWait(const Routed& r) const { return r.fleet() && !kernels_->Ready(r.build_id, r.modules); }

absl::StatusOr<std::shared_ptr<query::LocalQuery>> QueryRouter::Open(const Routed& r,
                                                                     std::chrono::system_clock::time_point deadline) {
  if (!r.fleet()) return own_shared_;
  // The call's deadline as a steady-clock point; no deadline (gRPC's infinite future) = 10 min.
  const auto now_sys = std::chrono::system_clock::now();
  const auto left = std::min<std::chrono::system_clock::duration>(deadline - now_sys, std::chrono::minutes(10));
  const auto until =
      std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(left);
  return kernels_->Get(r.build_id, r.modules, until, !t_counted_elsewhere);
}

}  // namespace symdex::api
