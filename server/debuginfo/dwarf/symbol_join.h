// Joins kernel symbols to DWARF function instances by address, never by name: kallsyms says
// "cpumask_weight.constprop.0" or "name_show.cold" where DWARF says "cpumask_weight" and
// "name_show", and several names may share one address.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace symdex::debuginfo {

// One address range of one function. `section` is "" for linked images (vmlinux).
struct FunctionSpan {
  int64_t function_id = 0;
  std::string section;
  uint64_t lo = 0, hi = 0;
  uint64_t entry = 0;
  std::string entry_section;
};

class FunctionLocator {
 public:
  explicit FunctionLocator(std::vector<FunctionSpan> spans);

  struct Hit {
    int64_t function_id = 0;
    bool at_entry = false;  // the address is the function's entry pc
    uint64_t offset = 0;    // from the start of the containing range
  };
  // The function whose range contains `addr` in `section`; at_entry when it is its entry.
  std::optional<Hit> Find(std::string_view section, uint64_t addr) const;

 private:
  std::map<std::string, std::vector<FunctionSpan>, std::less<>> by_section_;  // sorted by lo
};

// A live module's sections (name, base), and the (section, offset) an absolute address falls
// in: the section with the greatest base not above it.
std::optional<std::pair<std::string, uint64_t>> SectionOffset(
    const std::vector<std::pair<std::string, uint64_t>>& sections_sorted_by_base, uint64_t addr);

}  // namespace symdex::debuginfo
