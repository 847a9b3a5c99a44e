// Which index answers a call: the daemon's own (--db), or — for a "build-id:HEX" target that the
// own index does not hold, when the daemon runs with --fleet-cache — that kernel's index in the
// fleet cache, fetched and indexed on first use (fleet/kernel_cache.h). The handlers ask here
// and then call the query layer exactly as for the own index.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "server/common/status.h"
#include "server/query/answers.h"
#include "server/query/local_query.h"

namespace symdex::fleet {
class KernelCache;
}

namespace symdex::api {

class QueryRouter {
 public:
  // `kernels` may be null (no --fleet-cache): every call goes to `own`.
  QueryRouter(query::LocalQuery& own, fleet::KernelCache* kernels)
      : own_(own), own_shared_(&own, [](query::LocalQuery*) {}), kernels_(kernels) {}

  // The query for `target`; `modules` (frames requests) are indexed into a fleet kernel first.
  // `deadline`: how long the call may wait for an index run.
  absl::StatusOr<std::shared_ptr<query::LocalQuery>> For(const std::string& target,
                                                         const std::vector<query::FrameModule>& modules,
                                                         std::chrono::system_clock::time_point deadline);
  // Would For wait — a fleet kernel (or a module of it) not indexed and open yet, or its index
  // run going on? Such calls wait off the heavy pool (serve.h), so that a slow fetch holds no
  // thread that answers other calls. Never blocks.
  bool WouldWait(const std::string& target, const std::vector<query::FrameModule>& modules);
  // While one is alive on this thread, For does not count the call in the fleet request metrics:
  // a call that waited for its kernel first (serve.h) was counted by that wait.
  class CountedElsewhere {
   public:
    CountedElsewhere();
    ~CountedElsewhere();
    CountedElsewhere(const CountedElsewhere&) = delete;
    CountedElsewhere& operator=(const CountedElsewhere&) = delete;
  };
  query::LocalQuery& own() { return own_; }
  fleet::KernelCache* kernels() { return kernels_; }

 private:
  query::LocalQuery& own_;
  // `own_` as For returns it (it does not own it), made once: not a control block per call.
  const std::shared_ptr<query::LocalQuery> own_shared_;
  fleet::KernelCache* kernels_;
};

}  // namespace symdex::api
