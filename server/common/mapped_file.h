// A whole file mapped private and writable (copy-on-write): libelf's elf_memory takes a char*
// and may convert in place; nothing reaches the file. A debug vmlinux is ~600 MB: only the pages
// a parser touches are read. Unmapped when the object goes.
#pragma once

#include <cstddef>
#include <span>
#include <string>

#include "server/common/status.h"

namespace symdex {

class MappedFile {
 public:
  // NotFound when it cannot be opened; InvalidArgument for a non-regular or empty file.
  static absl::StatusOr<MappedFile> MapPrivate(const std::string& path);
  MappedFile(MappedFile&& o) noexcept;
  MappedFile& operator=(MappedFile&&) = delete;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  std::span<char> bytes() const { return {data_, size_}; }

 private:
  MappedFile(char* data, size_t size) : data_(data), size_(size) {}
  char* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace symdex
