// A small kernel target built in memory, for store and query tests.
#pragma once

#include "server/kernel/kernel_target.h"

namespace symdex::testing {

inline kernel::KernelTarget SmallTarget(const std::string& name, const std::string& kind = "live") {
  kernel::KernelTarget t;
  t.name = name;
  t.kind = kind;
  t.release = "6.1.0-test";
  t.build_id = BuildId::FromHex("00112233445566778899aabbccddeeff00112233");
  t.text_addr = 0xffffffff81000000ull;
  t.source = "fixture";
  t.modules.push_back({.name = "uio", .text_addr = 0xffffffffc0a00000ull});
  t.modules.push_back({.name = "mei"});
  auto add = [&](std::string n, char type, uint64_t addr, int module = -1, std::string section = "") {
    t.symbols.push_back(
        {.name = std::move(n), .addr = addr, .section = std::move(section), .module = module, .type = type});
  };
  add("_text", 'T', 0xffffffff81000000ull);
  add("name_show", 't', 0xffffffff81111dd0ull);
  add("name_show", 't', 0xffffffff816807f0ull);
  add("name_show", 't', 0xffffffffc0a003e0ull, 0);
  add("name_show.cold", 't', 0xffffffffc0a01000ull, 0);
  add("jhash", 't', 0xffffffff81200000ull);
  add("jhash", 't', 0xffffffff81300000ull);
  add("jhash", 't', 0xffffffffc0a00100ull, 0);
  add("jhash", 't', 0xffffffffc0a00200ull, 0);  // twice inside uio: MOD:jhash is ambiguous
  add("unique_fn", 'T', 0xffffffff81400000ull);
  add("__func__.12", 'r', 0xffffffff82000000ull);
  add("__func__.12", 'r', 0xffffffff82000010ull);
  add("__pfx_name_show", 't', 0xffffffff81111dc0ull);
  add("__pfx_name_show", 't', 0xffffffff816807e0ull);
  add("CSWTCH.5", 't', 0xffffffff81500000ull);  // noise even if typed as text
  add("CSWTCH.5", 't', 0xffffffff81500100ull);
  add("some_data", 'd', 0xffffffff83000000ull);
  add("some_data", 'd', 0xffffffff83000100ull);
  add("name_show", 't', 0x40, 1, ".text");  // offline-style module symbol
  add("init_module", 't', 0x0, 1, ".init.text");
  add("init_module", 'T', 0x0, 0, ".init.text");
  add("bpf_prog_x", 't', 0xffffffffc0000000ull, -1);
  kernel::DeriveSizesAndDedupe(t);
  return t;
}

}  // namespace symdex::testing
