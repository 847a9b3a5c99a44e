// JsonText (client/json_text.h) writes what nlohmann::json::dump(2) prints for the same value:
// every shape the verbs print, every ASCII character and UTF-8 in strings, nested at any depth.
#include "client/json_text.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace symdex::cli {
namespace {

// nlohmann's text for `j` nested `by` spaces deep, as JsonArrayOut nests its elements.
std::string Nested(const nlohmann::json& j, size_t by) {
  std::string out;
  for (char c : j.dump(2)) {
    out.push_back(c);
    if (c == '\n') out.append(by, ' ');
  }
  return out;
}

// Writes `j` through JsonText (objects' keys in nlohmann's order, which is sorted).
void Write(const nlohmann::json& j, JsonText& w) {
  switch (j.type()) {
    case nlohmann::json::value_t::object:
      w.BeginObject();
      for (const auto& [k, v] : j.items()) {
        w.Key(k);
        Write(v, w);
      }
      w.EndObject();
      break;
    case nlohmann::json::value_t::array:
      w.BeginArray();
      for (const auto& v : j) Write(v, w);
      w.EndArray();
      break;
    case nlohmann::json::value_t::string:
      w.String(j.get<std::string>());
      break;
    case nlohmann::json::value_t::number_unsigned:
      w.UInt(j.get<uint64_t>());
      break;
    case nlohmann::json::value_t::number_integer:
      w.Int(j.get<int64_t>());
      break;
    case nlohmann::json::value_t::null:
      w.Null();
      break;
    default:
      FAIL() << "not a shape the verbs print: " << j.dump();
  }
}

TEST(JsonTextTest, WritesWhatNlohmannPrints) {
  std::string every_ascii;
  for (int c = 0; c < 128; ++c) every_ascii.push_back(static_cast<char>(c));
  const nlohmann::json values[] = {
      nlohmann::json::object(),
      nlohmann::json::array(),
      {{"address", "0xffffffff81000000"},
       {"frames", nlohmann::json::array({{{"column", 1}, {"file", "fs/inode.c"}, {"function", "f"}, {"line", 12}},
                                         {{"column", 0}, {"file", ""}, {"function", "g"}, {"line", 0}}})},
       {"module", "vmlinux"},
       {"offset", uint64_t{18446744073709551615ull}},
       {"size", nullptr},
       {"symbol", "name_show"}},
      {{"frames", nlohmann::json::array()}, {"note", "not in vmlinux or any module"}, {"n", -5}},
      {{"s", every_ascii}, {"utf8", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"}, {"nested", {{"a", {{"b", {1, 2}}}}}}},
      nlohmann::json::array({nlohmann::json::object(), nlohmann::json::array(), "x", 0}),
  };
  for (const nlohmann::json& j : values) {
    for (size_t indent : {0, 4}) {
      SCOPED_TRACE(j.dump());
      std::string out(indent, ' ');
      JsonText w(out, indent);
      Write(j, w);
      EXPECT_EQ(out, std::string(indent, ' ') + Nested(j, indent));
    }
  }
}

TEST(JsonTextTest, TextThatIsNotUtf8IsRefusedAsNlohmannRefusesIt) {
  for (const char* bad : {"\xff", "a\xc3", "\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80"}) {
    std::string out;
    EXPECT_THROW(JsonText::AppendString(bad, out), nlohmann::json::type_error) << bad;
    EXPECT_THROW((void)nlohmann::json(bad).dump(), nlohmann::json::type_error) << bad;
  }
}

}  // namespace
}  // namespace symdex::cli
