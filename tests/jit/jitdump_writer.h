// Test-side jitdump writer: builds dumps byte by byte in either byte order, including malformed
// ones. Written from the format description (domain.md §5, perf's jitdump.h), not from the
// parser, so the two check each other.
#pragma once

#include <bit>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace symdex::jit::testing {

class JitdumpWriter {
 public:
  explicit JitdumpWriter(std::endian order = std::endian::little) : order_(order) {}

  struct HeaderFields {
    uint32_t version = 1;
    uint32_t elf_mach = 62;  // EM_X86_64
    uint32_t pad1 = 0xdeadbeef;
    uint32_t pid = 4242;
    uint64_t timestamp = 1700000000000000;
    uint64_t flags = 0;
    uint32_t extra_bytes = 0;  // header bytes beyond the 40 known ones
    // 0 = computed (40 + extra_bytes); otherwise written as is, to test hostile values.
    uint32_t total_size_override = 0;
  };

  JitdumpWriter& Header(const HeaderFields& h) {
    Magic();
    U32(h.version);
    U32(h.total_size_override ? h.total_size_override : 40 + h.extra_bytes);
    U32(h.elf_mach);
    U32(h.pad1);
    U32(h.pid);
    U64(h.timestamp);
    U64(h.flags);
    out_.append(h.extra_bytes, '\x5a');
    return *this;
  }
  JitdumpWriter& Header() { return Header(HeaderFields{}); }

  // CODE_LOAD; `padding` bytes go between the name's NUL and the code (legal: perf takes the
  // last code_size bytes). code_size_override != 0 writes a hostile code_size.
  JitdumpWriter& CodeLoad(uint64_t ts, uint32_t pid, uint32_t tid, uint64_t addr, uint64_t index, std::string_view name,
                          std::string_view code, size_t padding = 0, uint64_t code_size_override = 0) {
    std::string body;
    Put32(body, pid);
    Put32(body, tid);
    Put64(body, addr);  // vma
    Put64(body, addr);  // code_addr
    Put64(body, code_size_override ? code_size_override : code.size());
    Put64(body, index);
    body += name;
    body.push_back('\0');
    body.append(padding, '\0');
    body += code;
    return Record(0, ts, body);
  }

  JitdumpWriter& CodeMove(uint64_t ts, uint32_t pid, uint32_t tid, uint64_t old_addr, uint64_t new_addr, uint64_t size,
                          uint64_t index) {
    std::string body;
    Put32(body, pid);
    Put32(body, tid);
    Put64(body, new_addr);  // vma
    Put64(body, old_addr);
    Put64(body, new_addr);
    Put64(body, size);
    Put64(body, index);
    return Record(1, ts, body);
  }

  struct Entry {
    uint64_t addr;
    uint32_t line;
    uint32_t discrim;
    std::string name;  // written as is, then a NUL; "\xff" is the repeat marker
  };
  // nr_entry_override != 0 writes a hostile count. Pads the record to 8 bytes like V8.
  JitdumpWriter& DebugInfo(uint64_t ts, uint64_t code_addr, const std::vector<Entry>& entries,
                           uint64_t nr_entry_override = 0) {
    std::string body;
    Put64(body, code_addr);
    Put64(body, nr_entry_override ? nr_entry_override : entries.size());
    for (const auto& e : entries) {
      Put64(body, e.addr);
      Put32(body, e.line);
      Put32(body, e.discrim);
      body += e.name;
      body.push_back('\0');
    }
    body.append((8 - (16 + body.size()) % 8) % 8, '\0');
    return Record(2, ts, body);
  }

  JitdumpWriter& Close(uint64_t ts) { return Record(3, ts, ""); }

  // data = eh_frame ‖ eh_frame_hdr; padded to 8 like V8.
  JitdumpWriter& UnwindingInfo(uint64_t ts, std::string_view eh_frame, std::string_view eh_frame_hdr,
                               uint64_t mapped_size, uint64_t unwinding_size_override = 0) {
    std::string body;
    Put64(body, unwinding_size_override ? unwinding_size_override : eh_frame.size() + eh_frame_hdr.size());
    Put64(body, eh_frame_hdr.size());
    Put64(body, mapped_size);
    body += eh_frame;
    body += eh_frame_hdr;
    body.append((8 - (16 + body.size()) % 8) % 8, '\0');
    return Record(4, ts, body);
  }

  // Any record: prefix (id, 16 + body size unless overridden, ts) then body.
  JitdumpWriter& Record(uint32_t id, uint64_t ts, std::string_view body,
                        std::optional<uint32_t> size_override = std::nullopt) {
    record_offsets_.push_back(out_.size());
    U32(id);
    U32(size_override.value_or(static_cast<uint32_t>(16 + body.size())));
    U64(ts);
    out_ += body;
    return *this;
  }

  JitdumpWriter& Raw(std::string_view bytes) {
    out_ += bytes;
    return *this;
  }

  const std::string& bytes() const { return out_; }
  // File offset where each record written so far starts.
  const std::vector<size_t>& record_offsets() const { return record_offsets_; }

 private:
  void Magic() { U32(0x4A695444); }
  void U32(uint32_t v) { Put32(out_, v); }
  void U64(uint64_t v) { Put64(out_, v); }
  void Put32(std::string& s, uint32_t v) const { Put(s, v, 4); }
  void Put64(std::string& s, uint64_t v) const { Put(s, v, 8); }
  void Put(std::string& s, uint64_t v, int n) const {
    for (int i = 0; i < n; ++i) {
      int shift = order_ == std::endian::little ? 8 * i : 8 * (n - 1 - i);
      s.push_back(static_cast<char>(v >> shift & 0xff));
    }
  }

  std::endian order_;
  std::string out_;
  std::vector<size_t> record_offsets_;
};

}  // namespace symdex::jit::testing
