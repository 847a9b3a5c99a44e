// Parser for /proc/modules.
//
//   NAME SIZE REFCOUNT DEPS STATE ADDR [TAINT]
//   ext4 999424 1 - Live 0xffffffffc0a00000 (E)
//
// DEPS is "-" or "a,b,"; STATE is Live/Loading/Unloading; ADDR reads 0x0 under kptr_restrict.
// Pure: bytes in, records out.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "server/common/status.h"

namespace symdex::ingest {

struct ProcModule {
  std::string name;
  uint64_t size = 0;
  uint64_t addr = 0;
  std::string state;
  std::vector<std::string> deps;
};

absl::StatusOr<std::vector<ProcModule>> ParseProcModules(std::string_view text, std::string_view source);

}  // namespace symdex::ingest
