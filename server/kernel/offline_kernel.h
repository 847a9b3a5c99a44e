// Builds a KernelTarget for a kernel that is not running here: its System.map (vmlinux
// symbols) and a modules directory (every .ko / .ko.xz / .ko.zst / .ko.gz below it, read in
// parallel). Module symbol addresses are section offsets: a module has no address until loaded.
//
// A module that cannot be read or parsed is recorded (status 'error' with the reason) and the
// rest is indexed; a malformed System.map fails the whole load.
#pragma once

#include <string>

#include "server/common/status.h"
#include "server/ingest/elf_symbols.h"
#include "server/kernel/kernel_target.h"

namespace symdex::kernel {

absl::StatusOr<KernelTarget> LoadOfflineKernel(const OfflineKernelOptions& opts);

// Appends a module read from `path` (its symbol table `tab`, an ET_REL): a ModuleInfo with the
// file's build-ID and its symbols as offsets into their sections, less those the kernel never
// names an address by (ingest::ModuleSymbolIgnoreRule), counted by rule into `dropped`. Returns
// its index in t.modules.
int AppendOfflineModule(KernelTarget& t, std::string name, const std::string& path, ingest::ElfSymbolTable& tab,
                        std::vector<DroppedSymbols>& dropped);
// The same, the ModuleInfo appended and its symbols (moved out of `tab`) handed back instead.
std::vector<SymbolEntry> AddOfflineModule(KernelTarget& t, std::string name, const std::string& path,
                                          ingest::ElfSymbolTable& tab, std::vector<DroppedSymbols>& dropped);

// "drivers/net/foo-bar.ko.xz" -> "foo_bar": what the kernel calls a module whose .modinfo
// carries no name.
std::string ModuleNameFromPath(std::string_view path);

}  // namespace symdex::kernel
