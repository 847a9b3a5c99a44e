// One source frame of an address (common/kernel_records.h), under the debug-info readers' name.
#pragma once

#include "server/common/kernel_records.h"

namespace symdex::debuginfo {

using symdex::Frame;

}  // namespace symdex::debuginfo
