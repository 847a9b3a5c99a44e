// A GoogleTest fixture for tests that run the built `symdex` CLI against a database of their
// own in a fresh directory: Symdex(args) runs it, Json(args) adds --json and parses the answer.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/unit/test_util.h"

namespace symdex::testing {

// The JIT CLI tests' process and code bytes: two distinct code blobs (64 NOPs; INT3s and a RET).
inline constexpr uint32_t kPid = 4242;
inline const std::string kCodeA(64, '\x90');
inline const std::string kCodeB = std::string(32, '\xcc') + "\xc3";

class SymdexDbTest : public ::testing::Test {
 protected:
  CommandResult Symdex(const std::string& args) {
    return RunCommand(std::string(SYMDEX_BIN) + " --db '" + (dir_ / "index.db") + "' " + args);
  }
  nlohmann::json Json(const std::string& args, int want_exit = 0) {
    CommandResult r = Symdex(args + " --json");
    EXPECT_EQ(r.exit_code, want_exit) << args << "\n" << r.out << r.err;
    return nlohmann::json::parse(r.out.empty() ? "{}" : r.out);
  }
  TempDir dir_;
};

}  // namespace symdex::testing
