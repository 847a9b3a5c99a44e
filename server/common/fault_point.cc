#include "server/common/fault_point.h"

namespace symdex {

namespace fault_internal {
std::atomic<FaultHandler> handler{nullptr};
}  // namespace fault_internal

void SetFaultHandler(FaultHandler h) { fault_internal::handler.store(h, std::memory_order_relaxed); }

}  // namespace symdex
