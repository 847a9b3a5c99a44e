#include "client/instance_text.h"

#include <fmt/core.h>

#include "client/cli_common.h"

namespace symdex::cli {

std::string Location(const query::Instance& in) {
  if (in.addr) return Hex(*in.addr);
  return fmt::format("{}+{:#x}", in.section, in.section_offset);
}

std::string SizeText(const query::Instance& in) {
  if (!in.size) return "?";
  return fmt::format("{}{:#x}", in.size_exact ? "" : "~", *in.size);
}

nlohmann::json InstanceRowJson(const query::Instance& in) {
  nlohmann::json j = {{"name", in.name},
                      {"module", in.module.empty() ? "vmlinux" : in.module},
                      {"type", std::string(1, in.type)},
                      {"probe", in.probe},
                      {"same_name_total", in.same_name_total},
                      {"same_name_in_module", in.same_name_in_module}};
  j["address"] = in.addr ? nlohmann::json("0x" + Hex(*in.addr)) : nlohmann::json(nullptr);
  j["text_offset"] = in.text_offset ? nlohmann::json(*in.text_offset) : nlohmann::json(nullptr);
  // The symbol text_offset counts from: _text, or _stext where kallsyms lists no _text (arm64).
  if (in.text_offset) j["text_anchor"] = in.text_anchor;
  if (!in.section.empty()) {
    j["section"] = in.section;
    j["section_offset"] = in.section_offset;
    j["init_or_exit"] = in.init_or_exit;
  }
  j["size"] = in.size ? nlohmann::json(*in.size) : nlohmann::json(nullptr);
  j["size_exact"] = in.size_exact;
  if (in.dwarf) {
    j["dwarf"] = {{"function", in.dwarf->function},      {"cu", in.dwarf->cu},
                  {"file", in.dwarf->entry_file},        {"line", in.dwarf->entry_line},
                  {"decl_file", in.dwarf->decl_file},    {"decl_line", in.dwarf->decl_line},
                  {"inline_copy", in.dwarf->inline_copy}};
  } else {
    j["dwarf"] = nullptr;
  }
  if (!in.dwarf_note.empty()) j["dwarf_note"] = in.dwarf_note;
  j["verdict"] = VerdictJson(in.verdict);
  return j;
}

std::string SourceText(const query::Instance& in) {
  if (!in.dwarf) return in.dwarf_note.empty() ? "" : "[" + in.dwarf_note + "]";
  const DwarfInfo& d = *in.dwarf;
  std::string out = fmt::format("{}:{}", d.entry_file.empty() ? "?" : d.entry_file, d.entry_line);
  if (!d.decl_file.empty()) {
    out += d.decl_file == d.entry_file ? fmt::format(" (decl :{})", d.decl_line)
                                       : fmt::format(" (decl {}:{})", d.decl_file, d.decl_line);
  }
  if (!d.cu.empty() && d.cu != d.entry_file) out += " in " + d.cu;
  if (d.inline_copy) out += " [out-of-line inline]";
  if (!in.dwarf_note.empty()) out += " [" + in.dwarf_note + "]";
  return out;
}

void PrintInstanceRow(const query::Instance& in, bool show_name, bool reasons) {
  std::string module = in.module.empty() ? "vmlinux" : EscapeControl(in.module);
  std::string probe = in.probe.empty() ? "-" : EscapeControl(in.probe);
  if (in.init_or_exit) probe += " (init/exit)";
  if (show_name) {
    fmt::print("  {:<28} {:<16} {:<22} {} {:>7}  {:<22} {:<17} {}\n", EscapeControl(in.name), module, Location(in),
               in.type, SizeText(in), probe, VerdictText(in.verdict), SourceText(in));
  } else {
    fmt::print("  {:<16} {:<22} {} {:>7}  {:<22} {:<17} {}\n", module, Location(in), in.type, SizeText(in), probe,
               VerdictText(in.verdict), SourceText(in));
  }
  if (reasons && !in.verdict.reason.empty()) fmt::print("      {}\n", in.verdict.reason);
}

nlohmann::json FentryJson(const query::FentryVerdict& f) {
  return {{"reach", std::string(query::FentryReachName(f.kind))}, {"reason", f.reason}};
}

}  // namespace symdex::cli
