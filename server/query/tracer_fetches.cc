#include "server/query/tracer_fetches.h"

#include <fmt/core.h>

#include "server/common/strings.h"
#include "server/ingest/probe_arg.h"

namespace symdex::query {
namespace {

using ingest::KprobeFetch;
using Kind = KprobeFetch::Kind;
using Source = KprobeFetch::Source;

absl::Status NoForm(std::string_view tracer, const KprobeFetch& f, std::string_view why) {
  return absl::FailedPreconditionError(
      StrCat(tracer, " has no form for fetch arg '", Excerpt(f.text, 120), "': ", why));
}

// " + 24", " - 8", "" for 0.
std::string Plus(int64_t off) {
  if (off == 0) return "";
  return off > 0 ? StrCat(" + ", off) : StrCat(" - ", static_cast<uint64_t>(-(off + 1)) + 1);
}

// A mask of `width` low bits, in hex.
std::string Mask(unsigned width) {
  return fmt::format("0x{:x}", width >= 64 ? ~uint64_t{0} : (uint64_t{1} << width) - 1);
}

// The value an argument starts from, as each language writes it, and the memory reads after it
// ($stackN's word on the stack first).
struct Start {
  std::string bpftrace, c;
  std::string c_why;  // why C cannot name the start ("" = it can)
  std::vector<KprobeFetch::Read> reads;
  std::string ksym;  // a symbol C must declare extern __ksym
};

absl::StatusOr<Start> StartOf(std::string_view tracer, const KprobeFetch& f, const KernelArch& arch) {
  Start s;
  s.reads = f.reads;
  auto reg = [&](std::string_view r) -> absl::Status {
    if (!arch.HasRegister(r)) {
      return NoForm(tracer, f, StrCat("kprobe_events on ", arch.name, " has no register %", r));
    }
    s.bpftrace = StrCat("reg(\"", arch.BpftraceRegister(r), "\")");
    s.c = arch.CRegister(r);
    return absl::OkStatus();
  };
  const std::string_view sp = arch.dwarf_registers[arch.stack_pointer];
  switch (f.source) {
    case Source::kRegister:
      RETURN_IF_ERROR(reg(f.reg));
      break;
    case Source::kStack:
      RETURN_IF_ERROR(reg(sp));
      break;
    case Source::kStackEntry:
      if (f.number > (uint64_t{1} << 20)) return NoForm(tracer, f, "the stack entry is past the kernel's stack");
      RETURN_IF_ERROR(reg(sp));
      s.reads.insert(s.reads.begin(), KprobeFetch::Read{.offset = static_cast<int64_t>(f.number * 8)});
      break;
    case Source::kArg:
      if (f.number == 0 || f.number > arch.argument_registers.size()) {
        return NoForm(tracer, f,
                      StrCat("on ", arch.name, " only the first ", arch.argument_registers.size(),
                             " arguments are in registers; read the later ones from the stack"));
      }
      RETURN_IF_ERROR(reg(arch.argument_registers[f.number - 1]));
      s.bpftrace = StrCat("arg", f.number - 1);
      break;
    case Source::kRetval:
      RETURN_IF_ERROR(reg(arch.return_register));
      s.bpftrace = "retval";
      break;
    case Source::kSymbol:
      s.bpftrace =
          f.offset ? StrCat("(kaddr(\"", f.symbol, "\")", Plus(f.offset), ")") : StrCat("kaddr(\"", f.symbol, "\")");
      if (ingest::IsCName(f.symbol)) {
        s.c = StrCat("(__u64)&", f.symbol, Plus(f.offset));
        s.ksym = f.symbol;
      } else {
        s.c_why = StrCat("'", f.symbol, "' is not a C name, which an extern __ksym needs");
      }
      break;
    case Source::kAddress:
      s.bpftrace = fmt::format("0x{:x}", f.number);
      s.c = fmt::format("0x{:x}ULL", f.number);
      break;
    case Source::kComm:
      s.bpftrace = "comm";
      break;
    case Source::kImmediate:
      s.bpftrace = fmt::format("0x{:x}", f.number);
      s.c = fmt::format("0x{:x}ULL", f.number);
      break;
  }
  return s;
}

std::string IntType(unsigned bits, bool is_signed, std::string_view sprefix, std::string_view uprefix) {
  return StrCat(is_signed ? sprefix : uprefix, bits);
}

// The printf conversion of a value of `f`'s kind, as the trace line shows it.
std::string Conversion(const KprobeFetch& f) {
  switch (f.kind) {
    case Kind::kString:
    case Kind::kUserString:
      return "\\\"%s\\\"";
    case Kind::kSymbol:
      return "%s";
    case Kind::kBitfield:
      return "%lu";
    case Kind::kInteger:
      return f.hex ? "0x%lx" : (f.is_signed ? "%ld" : "%lu");
  }
  return "%lu";
}

absl::StatusOr<std::string> BpftraceValue(const KprobeFetch& f, const KernelArch& arch) {
  ASSIGN_OR_RETURN(Start s, StartOf("bpftrace", f, arch));
  if (f.source == Source::kComm) return std::string("comm");
  for (const auto& r : s.reads) {
    if (r.user && (f.kind != Kind::kUserString || &r != &s.reads.back())) {
      return NoForm("bpftrace", f, "a read of user memory inside a chain (bpftrace reads kernel memory there)");
    }
  }
  std::string v = s.bpftrace;
  const size_t n = s.reads.size();
  for (size_t k = 0; k + 1 < n; ++k) v = StrCat("*(uint64*)(", v, Plus(s.reads[k].offset), ")");
  const std::string at = n ? StrCat("(", v, Plus(s.reads.back().offset), ")") : v;
  const std::string ty = IntType(f.bits, f.is_signed, "int", "uint");
  switch (f.kind) {
    case Kind::kString:
      return StrCat("str", at);
    case Kind::kUserString:
      return StrCat("str(uptr", at, ")");
    case Kind::kSymbol:
      return n ? StrCat("ksym(*(uint64*)", at, ")") : StrCat("ksym(", v, ")");
    case Kind::kBitfield:
      return n ? StrCat("((*(uint", f.bits, "*)", at, " >> ", f.bit_offset, ") & ", Mask(f.bit_width), ")")
               : StrCat("((", v, " >> ", f.bit_offset, ") & ", Mask(f.bit_width), ")");
    case Kind::kInteger:
      return n ? StrCat("*(", ty, "*)", at) : StrCat("(", ty, ")", v);
  }
  return NoForm("bpftrace", f, "an unknown type");
}

std::string CType(const KprobeFetch& f) {
  switch (f.kind) {
    case Kind::kSymbol:
      return "__u64";
    case Kind::kBitfield:
      return StrCat("__u", f.bits);
    default:
      return IntType(f.bits, f.is_signed, "__s", "__u");
  }
}

}  // namespace

absl::StatusOr<std::vector<ingest::KprobeFetch>> ParseFetchArgs(const std::vector<std::string>& fetchargs) {
  std::vector<ingest::KprobeFetch> out;
  for (size_t k = 0; k < fetchargs.size(); ++k) {
    ASSIGN_OR_RETURN(auto f, ingest::ParseKprobeFetch(fetchargs[k], k + 1));
    out.push_back(std::move(f));
  }
  return out;
}

absl::StatusOr<std::string> BpftraceProgram(std::string_view probe, const std::vector<ingest::KprobeFetch>& args,
                                            const KernelArch& arch) {
  std::vector<std::string> convs, values;
  for (const auto& f : args) {
    ASSIGN_OR_RETURN(std::string v, BpftraceValue(f, arch));
    convs.push_back(StrCat(f.name, "=", Conversion(f)));
    values.push_back(std::move(v));
  }
  return StrCat(probe, " { printf(\"", StrJoin(convs, " "), "\\n\", ", StrJoin(values, ", "), "); }");
}

absl::StatusOr<std::string> CFetchStruct(std::string_view event, std::string_view definition,
                                         const std::vector<ingest::KprobeFetch>& args, const KernelArch& arch) {
  const std::string prefix = ingest::IsCName(event) ? std::string(event) : "probe";
  std::vector<std::string> ksyms, fields, body;
  bool uses_v = false;
  for (const auto& f : args) {
    if (!ingest::IsCName(f.name)) return NoForm("C", f, StrCat("'", f.name, "' is not a C name for its field"));
    ASSIGN_OR_RETURN(Start s, StartOf("C", f, arch));
    if (!s.c_why.empty()) return NoForm("C", f, s.c_why);
    if (!s.ksym.empty() && std::find(ksyms.begin(), ksyms.end(), s.ksym) == ksyms.end()) ksyms.push_back(s.ksym);
    const std::string field = StrCat("a->", f.name);
    body.push_back(StrCat("\t/* ", f.text, " */"));
    if (f.source == Source::kComm) {
      fields.push_back(StrCat("\tchar ", f.name, "[16];"));
      body.push_back(StrCat("\tbpf_get_current_comm(", field, ", sizeof(", field, "));"));
      continue;
    }
    const bool str = f.kind == Kind::kString || f.kind == Kind::kUserString;
    fields.push_back(str ? StrCat("\tchar ", f.name, "[64];") : StrCat("\t", CType(f), " ", f.name, ";"));
    const size_t n = s.reads.size();
    if (n == 0) {
      if (str) {
        body.push_back(StrCat("\tbpf_probe_read_", f.kind == Kind::kUserString ? "user" : "kernel", "_str(", field,
                              ", sizeof(", field, "), (const void *)", s.c, ");"));
      } else if (f.kind == Kind::kBitfield) {
        body.push_back(StrCat("\t", field, " = (", s.c, " >> ", f.bit_offset, ") & ", Mask(f.bit_width), ";"));
      } else {
        body.push_back(StrCat("\t", field, " = (", CType(f), ")", s.c, ";"));
      }
      continue;
    }
    uses_v = true;
    body.push_back(StrCat("\tv = ", s.c, ";"));
    for (size_t k = 0; k + 1 < n; ++k) {
      body.push_back(StrCat("\tbpf_probe_read_", s.reads[k].user ? "user" : "kernel",
                            "(&v, sizeof(v), (const void *)(v", Plus(s.reads[k].offset), "));"));
    }
    const auto& last = s.reads.back();
    const std::string at = StrCat("(const void *)(v", Plus(last.offset), ")");
    const char* mem = last.user ? "user" : "kernel";
    if (str) {
      const char* strmem = f.kind == Kind::kUserString ? "user" : mem;
      body.push_back(StrCat("\tbpf_probe_read_", strmem, "_str(", field, ", sizeof(", field, "), ", at, ");"));
    } else if (f.kind == Kind::kBitfield) {
      body.push_back(StrCat("\t{\n\t\t__u", f.bits, " c = 0;\n\n\t\tbpf_probe_read_", mem, "(&c, sizeof(c), ", at,
                            ");\n\t\t", field, " = (c >> ", f.bit_offset, ") & ", Mask(f.bit_width), ";\n\t}"));
    } else {
      body.push_back(StrCat("\tbpf_probe_read_", mem, "(&", field, ", sizeof(", field, "), ", at, ");"));
    }
  }
  std::string out = StrCat("/* ", definition, "\n * read as kprobe_events reads it, on ", arch.name,
                           " (vmlinux.h, bpf/bpf_helpers.h) */\n");
  for (const auto& k : ksyms) out += StrCat("extern const void ", k, " __ksym;\n");
  if (!ksyms.empty()) out += "\n";
  out += StrCat("struct ", prefix, "_args {\n", StrJoin(fields, "\n"), "\n};\n\n");
  out +=
      StrCat("static __always_inline void ", prefix, "_fetch(struct pt_regs *ctx, struct ", prefix, "_args *a)\n{\n");
  if (uses_v) out += "\t__u64 v;\n\n";
  out += StrJoin(body, "\n") + "\n}\n";
  return out;
}

}  // namespace symdex::query
