// Fuzzes the jitdump parser: any bytes must give records or an error, never a crash or a read past
// the input; the incremental reader must agree with the one-shot parse however the input is split.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "server/ingest/jitdump.h"
#include "server/jit/build_ids.h"

using namespace symdex::jit;
using namespace symdex::ingest;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto dump = ParseJitdump(bytes, "fuzz");
  if (dump.ok()) {
    uint64_t prev_end = dump->header.total_size;
    int hashed = 0;
    for (const auto& r : dump->records) {
      const RecordPrefix& p = PrefixOf(r);
      if (p.file_offset < prev_end || p.total_size < kJitRecordPrefixSize) __builtin_trap();
      if (p.file_offset + p.total_size > size) __builtin_trap();
      prev_end = p.file_offset + p.total_size;
      if (const auto* load = std::get_if<CodeLoad>(&r)) {
        if (load->code.size() != load->code_size) __builtin_trap();
        if (load->name.size() + load->code.size() + 57 > p.total_size) __builtin_trap();
        if (load->unwinding_info &&
            load->unwinding_info->eh_frame().size() + load->unwinding_info->eh_frame_hdr().size() !=
                load->unwinding_info->data.size()) {
          __builtin_trap();
        }
        if (hashed++ < 2) {
          for (auto s : {symdex::JitBuildIdScheme::kMd5Addr, symdex::JitBuildIdScheme::kSha1Symtab,
                         symdex::JitBuildIdScheme::kSymdex}) {
            auto id = JitBuildId(s, dump->header, *load);
            if (!id.ok() || id->raw().size() != 20) __builtin_trap();
          }
        }
      }
    }
    if (dump->truncated != (dump->truncated_bytes > 0)) __builtin_trap();
    if (dump->truncated && dump->truncated_at + dump->truncated_bytes != size) __builtin_trap();
  }

  // Split the input in two reads, as a reader of a growing file would see it.
  size_t split = size == 0 ? 0 : data[0] * size / 256;
  JitdumpReader reader("fuzz");
  std::vector<Record> records;
  auto first = reader.Feed(bytes.substr(0, split), &records);
  absl::Status status = first.status();
  if (first.ok()) {
    if (reader.offset() > split) __builtin_trap();
    auto second = reader.Feed(bytes.substr(reader.offset()), &records);
    status = second.status();
  }
  if (dump.ok() != status.ok()) {
    // The one-shot parse fails on a short header; the reader just waits for more bytes.
    if (dump.ok() || reader.header().has_value()) __builtin_trap();
  }
  if (dump.ok() && records != dump->records) __builtin_trap();
  return 0;
}
