// JSON text written as it is made, byte for byte what nlohmann::json::dump(2) prints for the same
// value (keys in the order given, which must be the sorted order nlohmann's objects keep), without
// building the tree first: for the verbs that print tens of thousands of answers (`addr --json`),
// where building and dumping the tree was a third of the run.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace symdex::cli {

class JsonText {
 public:
  // Appends to `out`; the value's own lines are nested `indent` spaces deep (its first line is
  // where `out` ends: the caller wrote what goes before it).
  JsonText(std::string& out, size_t indent) : out_(out), base_(indent) { levels_.reserve(8); }

  JsonText& BeginObject() { return Open('{'); }
  JsonText& EndObject() { return Close('}'); }
  JsonText& BeginArray() { return Open('['); }
  JsonText& EndArray() { return Close(']'); }
  // The next member's key (in an object).
  JsonText& Key(std::string_view key);
  JsonText& String(std::string_view s);
  JsonText& Int(int64_t v);
  JsonText& UInt(uint64_t v);
  JsonText& Null();

  // `s` as a JSON string, as nlohmann escapes it: ", \ and control characters escaped (\b \f \n
  // \r \t, the others \u00xx), UTF-8 kept. Text that is not UTF-8 is handed to nlohmann, which
  // refuses it as it would have (type_error 316).
  static void AppendString(std::string_view s, std::string& out);

 private:
  JsonText& Open(char c);
  JsonText& Close(char c);
  void BeforeValue();  // the separator and indentation an array element needs
  void Indent(size_t depth) { out_.append(base_ + 2 * depth, ' '); }

  std::string& out_;
  size_t base_;
  struct Level {
    bool array;
    size_t members;
  };
  std::vector<Level> levels_;
  bool after_key_ = false;
};

}  // namespace symdex::cli
