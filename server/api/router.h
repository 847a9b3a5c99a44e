// Which index answers a call: the daemon's own (--db), or — for a "build-id:HEX" target that the
// own index does not hold, when the daemon runs with --fleet-cache — that kernel's index in the
// fleet cache, fetched and indexed on first use (fleet/kernel_cache.h). The handler routes a call
// once (Route), waits off the pool when the route would wait, opens the route's query and asks it
// exactly as the own index.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "server/common/index_inputs.h"
#include "server/common/status.h"
#include "server/query/answers.h"
#include "server/query/local_query.h"

namespace symdex::fleet {
class KernelCache;
}

namespace symdex::api {

// Where one call goes, decided once per call (QueryRouter::Route): the own index, or a fleet
// kernel by build-ID with the modules a frames call names (indexed into it first).
struct Routed {
  std::string build_id;                  // the fleet kernel's; "" = the own index
  std::vector<ModuleByBuildId> modules;  // its modules the call needs
  bool fleet() const { return !build_id.empty(); }
};

class QueryRouter {
 public:
  // `kernels` may be null (no --fleet-cache): every call goes to `own`.
  QueryRouter(query::LocalQuery& own, fleet::KernelCache* kernels)
      : own_(own), own_shared_(&own, [](query::LocalQuery*) {}), kernels_(kernels) {}

  // Where a call for `target` goes: a "build-id:HEX" target that the own index does not hold goes
  // to that fleet kernel when the daemon has a fleet cache; every other target to the own index
  // (which then says whether it has it). The one place a call's target is looked at before the
  // query itself resolves it among its own targets.
  Routed Route(const std::string& target, const std::vector<query::FrameModule>& modules) const;
  // The query `r` names, its kernel (and modules) fetched and indexed first for a fleet call.
  // `deadline`: how long the call may wait for an index run.
  absl::StatusOr<std::shared_ptr<query::LocalQuery>> Open(const Routed& r,
                                                          std::chrono::system_clock::time_point deadline);
  // Would Open wait — the fleet kernel (or a module of it) not indexed and open yet, or its index
  // run going on? Such calls wait off the heavy pool (serve.h), so that a slow fetch holds no
  // thread that answers other calls. Never blocks.
  bool WouldWait(const Routed& r) const;
  // While one is alive on this thread, Open does not count the call in the fleet request metrics:
  // a call that waited for its kernel first (serve.h) was counted by that wait.
  class CountedElsewhere {
   public:
    CountedElsewhere();
    ~CountedElsewhere();
    CountedElsewhere(const CountedElsewhere&) = delete;
    CountedElsewhere& operator=(const CountedElsewhere&) = delete;
  };
  query::LocalQuery& own() { return own_; }

 private:
  query::LocalQuery& own_;
  // `own_` as Open returns it (it does not own it), made once: not a control block per call.
  const std::shared_ptr<query::LocalQuery> own_shared_;
  fleet::KernelCache* kernels_;
};

}  // namespace symdex::api
