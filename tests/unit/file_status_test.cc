// The stored/printed names of input-file and debug-file statuses: they must stay exactly what
// schema 002/003 CHECK and `symdex status` has always printed, and read back to the same value.
#include <gtest/gtest.h>

#include "server/kernel/file_status.h"

namespace symdex::kernel {
namespace {

TEST(FileStatus, InputNamesAreTheStoredOnesAndRoundTrip) {
  const std::pair<InputFileStatus, const char*> all[] = {{InputFileStatus::kUsed, "used"},
                                                         {InputFileStatus::kMissing, "missing"},
                                                         {InputFileStatus::kError, "error"},
                                                         {InputFileStatus::kSkipped, "skipped"}};
  for (const auto& [s, name] : all) {
    EXPECT_EQ(Name(s), name);
    auto back = ParseInputFileStatus(name);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, s);
  }
}

TEST(FileStatus, DebugNamesAreTheStoredOnesAndRoundTrip) {
  const std::pair<DebugFileStatus, const char*> all[] = {{DebugFileStatus::kUsed, "used"},
                                                         {DebugFileStatus::kCached, "cached"},
                                                         {DebugFileStatus::kNotFound, "not-found"},
                                                         {DebugFileStatus::kBuildIdMismatch, "build-id-mismatch"},
                                                         {DebugFileStatus::kParseError, "parse-error"},
                                                         {DebugFileStatus::kNoBuildId, "no-build-id"}};
  for (const auto& [s, name] : all) {
    EXPECT_EQ(Name(s), name);
    auto back = ParseDebugFileStatus(name);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, s);
  }
}

TEST(FileStatus, UnknownStoredNameIsAnErrorNamingIt) {
  auto d = ParseDebugFileStatus("half-cached");
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("'half-cached'"), absl::string_view::npos) << d.status();
  EXPECT_FALSE(ParseInputFileStatus("").ok());
  EXPECT_FALSE(ParseInputFileStatus("Used").ok());  // case matters: the CHECK is exact
  EXPECT_FALSE(ParseDebugFileStatus("cached ").ok());
}

}  // namespace
}  // namespace symdex::kernel
