#include "server/debuginfo/dwarf/fetch_args.h"

#include <dwarf.h>

#include <algorithm>
#include <optional>

#include <fmt/format.h>

#include "server/common/strings.h"

namespace symdex::debuginfo {
namespace {

using ingest::ProbeArg;

std::string Hex(uint64_t v) { return fmt::format("{:x}", v); }

const char* Name(Dwarf_Die* d) {
  const char* n = dwarf_diename(d);
  return n ? n : "";
}

// The type a DIE's DW_AT_type names with typedefs and qualifiers stripped (perf's
// die_get_real_type); nullopt for void or no type.
std::optional<Dwarf_Die> RealType(Dwarf_Die* die) {
  Dwarf_Attribute a;
  Dwarf_Die t;
  if (dwarf_attr_integrate(die, DW_AT_type, &a) == nullptr || dwarf_formref_die(&a, &t) == nullptr) return std::nullopt;
  for (int hops = 0; hops < 64; ++hops) {
    const int tag = dwarf_tag(&t);
    if (tag != DW_TAG_typedef && tag != DW_TAG_const_type && tag != DW_TAG_volatile_type &&
        tag != DW_TAG_restrict_type && tag != DW_TAG_shared_type && tag != DW_TAG_atomic_type) {
      return t;
    }
    Dwarf_Die next;
    if (dwarf_attr(&t, DW_AT_type, &a) == nullptr || dwarf_formref_die(&a, &next) == nullptr) return std::nullopt;
    t = next;
  }
  return std::nullopt;
}

std::string TypeName(Dwarf_Die* die, int depth = 0);

// A subroutine type's parameter types, C-spelled: "struct file *, int", "void", "int, ...".
std::string Parameters(Dwarf_Die* fn, int depth) {
  std::vector<std::string> out;
  Dwarf_Die p;
  if (depth <= 16 && dwarf_child(fn, &p) == 0) {
    do {
      if (dwarf_tag(&p) == DW_TAG_formal_parameter) out.push_back(TypeName(&p, depth + 1));
      if (dwarf_tag(&p) == DW_TAG_unspecified_parameters) out.push_back("...");
    } while (dwarf_siblingof(&p, &p) == 0);
  }
  return out.empty() ? "void" : StrJoin(out, ", ");
}

// A C spelling of a type, for messages and `symdex vars`: "struct file *", "unsigned int",
// "int (*)(struct inode *, struct file *)".
std::string TypeName(Dwarf_Die* die, int depth) {
  Dwarf_Attribute a;
  Dwarf_Die t;
  if (depth > 16) return "...";
  if (dwarf_attr_integrate(die, DW_AT_type, &a) == nullptr || dwarf_formref_die(&a, &t) == nullptr) return "void";
  const std::string inner = Name(&t);
  switch (dwarf_tag(&t)) {
    case DW_TAG_pointer_type: {
      Dwarf_Attribute pa;
      Dwarf_Die fn;
      if (dwarf_attr(&t, DW_AT_type, &pa) != nullptr && dwarf_formref_die(&pa, &fn) != nullptr &&
          dwarf_tag(&fn) == DW_TAG_subroutine_type) {
        return TypeName(&fn, depth + 1) + " (*)(" + Parameters(&fn, depth + 1) + ")";  // a function pointer
      }
      return TypeName(&t, depth + 1) + " *";
    }
    case DW_TAG_const_type:
    case DW_TAG_volatile_type: {
      // An array's qualifier is its elements' (C has no const array): said once.
      const std::string q = dwarf_tag(&t) == DW_TAG_const_type ? "const " : "volatile ";
      std::string rest = TypeName(&t, depth + 1);
      return rest.starts_with(q) ? rest : q + rest;
    }
    case DW_TAG_restrict_type:
      return TypeName(&t, depth + 1);
    case DW_TAG_atomic_type:
      return "_Atomic " + TypeName(&t, depth + 1);
    case DW_TAG_structure_type:
      return "struct " + (inner.empty() ? "{...}" : inner);
    case DW_TAG_union_type:
      return "union " + (inner.empty() ? "{...}" : inner);
    case DW_TAG_enumeration_type:
      return "enum " + (inner.empty() ? "{...}" : inner);
    case DW_TAG_array_type: {
      std::string dims;
      Dwarf_Die sub;
      if (dwarf_child(&t, &sub) == 0) {
        do {
          if (dwarf_tag(&sub) != DW_TAG_subrange_type) continue;
          Dwarf_Word n = 0;
          if (dwarf_formudata(dwarf_attr(&sub, DW_AT_count, &a), &n) == 0) {
            dims += StrCat("[", n, "]");
          } else if (dwarf_formudata(dwarf_attr(&sub, DW_AT_upper_bound, &a), &n) == 0) {
            dims += StrCat("[", n + 1, "]");
          } else {
            dims += "[]";
          }
        } while (dwarf_siblingof(&sub, &sub) == 0);
      }
      return TypeName(&t, depth + 1) + dims;
    }
    case DW_TAG_subroutine_type:
      return TypeName(&t, depth + 1) + " (" + Parameters(&t, depth + 1) + ")";
    default:
      return inner.empty() ? "?" : inner;
  }
}

int64_t SizeOf(Dwarf_Die* type) {
  Dwarf_Word size = 0;
  if (dwarf_aggregate_size(type, &size) != 0) return -1;
  return static_cast<int64_t>(size);
}

bool IsSigned(Dwarf_Die* type) {
  Dwarf_Attribute a;
  Dwarf_Word enc = 0;
  if (dwarf_formudata(dwarf_attr(type, DW_AT_encoding, &a), &enc) != 0) return false;
  return enc == DW_ATE_signed || enc == DW_ATE_signed_char || enc == DW_ATE_signed_fixed;
}

// Where a value is: in a register (its name), or in memory at `base` + `offset` — `base` being a
// fetch arg that yields an address ("%sp", "+8(%di)") or, for static storage, the address
// itself (then the fetch is "@" + static_form(addr + offset)).
struct Place {
  bool in_register = false;
  std::string reg;  // "%di"
  std::string base;
  int64_t offset = 0;
  bool is_static = false;
  uint64_t static_addr = 0;
  bool is_constant = false;  // DW_AT_const_value: kprobe_events' immediate, \VALUE (in_register too)
};

std::string Offset(int64_t off) {
  return off < 0 ? StrCat("-", static_cast<uint64_t>(-(off + 1)) + 1) : StrCat("+", off);
}

class Compiler {
 public:
  Compiler(const FetchSite& site, const FetchContext& ctx) : site_(site), ctx_(ctx) {
    pc_ = site.pc < site.entry ? site.entry : site.pc;
  }

  absl::StatusOr<CompiledArgs> Compile(const std::vector<ProbeArg>& args) {
    CompiledArgs out;
    for (const ProbeArg& a : args) {
      switch (a.kind) {
        case ProbeArg::Kind::kRaw:
          out.fetchargs.push_back(a.text);
          break;
        case ProbeArg::Kind::kRetval:
          if (!site_.ret)
            return absl::InvalidArgumentError("$retval is the return value: it needs a return probe (--return)");
          out.fetchargs.push_back(
              StrCat(a.name.empty() ? "" : a.name + "=", "$retval", a.type.empty() ? "" : ":" + a.type));
          break;
        case ProbeArg::Kind::kParams:
        case ProbeArg::Kind::kVars: {
          if (site_.ret) return absl::InvalidArgumentError(StrCat(a.text, ": a return probe fetches $retval only"));
          std::vector<Dwarf_Die> vars;
          CollectVars(&site_.function, a.kind == ProbeArg::Kind::kVars, 0, vars);
          for (Dwarf_Die& v : vars) {
            std::string why;
            auto place = LocationAt(&v, &why);
            if (!place) continue;  // as perf: $params lists the ones that can be fetched here
            ProbeArg one;
            one.kind = ProbeArg::Kind::kVariable;
            one.var = Name(&v);
            one.text = one.var;
            auto f = FetchOf(one, v, *place, out.notes);
            if (!f.ok()) continue;
            out.fetchargs.push_back(StrCat(one.var, "=", *f));
          }
          break;
        }
        case ProbeArg::Kind::kVariable: {
          if (site_.ret) {
            return absl::InvalidArgumentError(
                StrCat(a.text, ": a return probe fetches $retval only (the variables are gone when it fires)"));
          }
          std::optional<Dwarf_Die> v = FindVariable(a.var);
          if (!v) {
            return absl::InvalidArgumentError(
                StrCat("no variable '", a.var, "' in scope in ", Name(&site_.function), " at ", Where()));
          }
          std::string why;
          auto place = LocationAt(&*v, &why);
          if (!place) return absl::OutOfRangeError(StrCat("'", a.var, "' cannot be fetched at ", Where(), ": ", why));
          ASSIGN_OR_RETURN(std::string f, FetchOf(a, *v, *place, out.notes));
          out.fetchargs.push_back(StrCat(a.name.empty() ? DefaultName(a) : a.name, "=", f));
          break;
        }
      }
    }
    return out;
  }

  // Every parameter (and with `vars`, every variable) in scope at pc, in DIE order: the
  // function's own, then those of the lexical blocks that hold pc (not an inlined callee's).
  void CollectVars(Dwarf_Die* scope, bool vars, int depth, std::vector<Dwarf_Die>& out) {
    Dwarf_Die child;
    if (depth > 32 || dwarf_child(scope, &child) != 0) return;
    do {
      const int tag = dwarf_tag(&child);
      if (tag == DW_TAG_formal_parameter && depth == 0) {
        out.push_back(child);
      } else if (tag == DW_TAG_variable && vars) {
        out.push_back(child);
      } else if (tag == DW_TAG_lexical_block && vars && dwarf_haspc(&child, pc_) == 1) {
        CollectVars(&child, vars, depth + 1, out);
      }
    } while (dwarf_siblingof(&child, &child) == 0);
  }

  // The variable named `name` in the innermost scope holding pc, else a global of the unit.
  std::optional<Dwarf_Die> FindVariable(const std::string& name) {
    std::optional<Dwarf_Die> found;
    FindIn(&site_.function, name, 0, found);
    if (found) return found;
    // An inlined copy without the parameter at all: the compiler dropped it there; its abstract
    // declaration says it exists (and has no location to fetch).
    Dwarf_Attribute origin_attr;
    Dwarf_Die origin;
    if (dwarf_tag(&site_.function) == DW_TAG_inlined_subroutine &&
        dwarf_formref_die(dwarf_attr(&site_.function, DW_AT_abstract_origin, &origin_attr), &origin) != nullptr) {
      FindIn(&origin, name, 0, found);
      if (found) return found;
    }
    Dwarf_Die child;
    Dwarf_Die cu = site_.cu;
    if (dwarf_child(&cu, &child) != 0) return std::nullopt;
    do {
      if (dwarf_tag(&child) == DW_TAG_variable && name == Name(&child)) return child;
    } while (dwarf_siblingof(&child, &child) == 0);
    return std::nullopt;
  }
  void FindIn(Dwarf_Die* scope, const std::string& name, int depth, std::optional<Dwarf_Die>& found) {
    Dwarf_Die child;
    if (depth > 32 || dwarf_child(scope, &child) != 0) return;
    do {
      const int tag = dwarf_tag(&child);
      if ((tag == DW_TAG_formal_parameter || tag == DW_TAG_variable) && name == Name(&child)) {
        found = child;  // a deeper block's, found later, shadows it
      } else if (tag == DW_TAG_lexical_block && dwarf_haspc(&child, pc_) == 1) {
        std::optional<Dwarf_Die> inner;
        FindIn(&child, name, depth + 1, inner);
        if (inner) {
          found = inner;
          return;
        }
      }
    } while (dwarf_siblingof(&child, &child) == 0);
  }

  std::string Where() {
    const uint64_t off = pc_ - site_.symbol;
    return StrCat(Name(&site_.frame), "+", off == 0 ? "0" : "0x" + Hex(off));
  }

  // Where the function's code ends (the highest end of its ranges): a location that is not a
  // list holds over the whole scope, which libdw gives as [0, ~0).
  Dwarf_Addr FunctionEnd() {
    if (function_end_ == 0) {
      Dwarf_Die fn = site_.frame;
      Dwarf_Addr base = 0, lo = 0, hi = 0;
      ptrdiff_t off = 0;
      while ((off = dwarf_ranges(&fn, off, &base, &lo, &hi)) > 0) function_end_ = std::max(function_end_, hi);
      if (function_end_ == 0) function_end_ = ~Dwarf_Addr{0};
    }
    return function_end_;
  }
  Dwarf_Addr function_end_ = 0;

  // The ranges (offsets from the symbol) where `var` has a location.
  std::string Ranges(Dwarf_Die* var) {
    Dwarf_Attribute a;
    if (dwarf_attr_integrate(var, DW_AT_location, &a) == nullptr) return "";
    std::vector<std::string> parts;
    std::vector<std::pair<uint64_t, uint64_t>> spans;
    Dwarf_Addr base = 0, start = 0, end = 0;
    Dwarf_Op* expr = nullptr;
    size_t len = 0;
    ptrdiff_t off = 0;
    while ((off = dwarf_getlocations(&a, off, &base, &start, &end, &expr, &len)) > 0 && spans.size() < 16) {
      if (len == 0 || start >= end) continue;
      std::string why;
      if (!Evaluate(expr, len, &why, WholeSize(var))) continue;
      end = std::min(end, FunctionEnd());
      if (end <= site_.symbol || start >= end) continue;
      const uint64_t lo = start >= site_.symbol ? start - site_.symbol : 0, hi = end - site_.symbol;
      if (!spans.empty() && spans.back().second == lo) {
        spans.back().second = hi;
      } else {
        spans.emplace_back(lo, hi);
      }
    }
    for (const auto& [lo, hi] : spans) parts.push_back(StrCat("+0x", Hex(lo), "..+0x", Hex(hi)));
    return StrJoin(parts, ", ");
  }

  // The place of `var` at pc, or why there is none.
  std::optional<Place> LocationAt(Dwarf_Die* var, std::string* why) {
    Dwarf_Attribute a;
    if (dwarf_attr_integrate(var, DW_AT_location, &a) == nullptr) {
      Dwarf_Sword value = 0;
      if (dwarf_attr_integrate(var, DW_AT_const_value, &a) != nullptr) {
        // The compiler folded it into the code: its value is fetched as an immediate (as perf does).
        if (dwarf_formsdata(&a, &value) == 0) {
          return Place{.in_register = true, .reg = StrCat("\\", value), .is_constant = true};
        }
        *why = "it is a constant the compiler folded into the code, of a form no immediate holds";
        return std::nullopt;
      }
      *why = "the compiler kept no location for it (optimized out)";
      return std::nullopt;
    }
    Dwarf_Op* expr = nullptr;
    size_t len = 0;
    int n = dwarf_getlocation_addr(&a, pc_, &expr, &len, 1);
    if (n <= 0 && dwarf_tag(var) == DW_TAG_formal_parameter && pc_ == site_.entry && site_.entry_slack > 0) {
      // A parameter whose first range starts just past the ftrace site (which changes no register).
      Dwarf_Addr base = 0, start = 0, end = 0;
      ptrdiff_t off = 0;
      Dwarf_Op* e = nullptr;
      size_t l = 0;
      while ((off = dwarf_getlocations(&a, off, &base, &start, &end, &e, &l)) > 0) {
        if (start > pc_ && start <= pc_ + site_.entry_slack) {
          expr = e;
          len = l;
          n = 1;
          break;
        }
      }
    }
    if (n <= 0 || len == 0) {
      std::string ranges = Ranges(var);
      *why = ranges.empty() ? "the compiler kept no location for it here (optimized out)"
                            : StrCat("its location list has no entry here; it can be fetched at ", ranges);
      return std::nullopt;
    }
    auto p = Evaluate(expr, len, why, WholeSize(var));
    if (!p) {
      std::string ranges = Ranges(var);
      if (!ranges.empty()) *why += StrCat("; it can be fetched at ", ranges);
    }
    return p;
  }

  std::optional<std::string> Register(uint64_t regno, std::string* why) {
    const auto& regs = ctx_.arch->dwarf_registers;
    if (regno >= regs.size() || regs[regno].empty()) {
      *why = StrCat("it is in DWARF register ", regno, ", which kprobe_events cannot read on ", ctx_.arch->name);
      return std::nullopt;
    }
    return StrCat("%", regs[regno]);
  }

  // The size in bytes of `var`'s type (0: not known).
  static Dwarf_Word WholeSize(Dwarf_Die* var) {
    Dwarf_Attribute a;
    Dwarf_Die type;
    Dwarf_Word size = 0;
    if (dwarf_attr_integrate(var, DW_AT_type, &a) == nullptr || dwarf_formref_die(&a, &type) == nullptr ||
        dwarf_aggregate_size(&type, &size) != 0) {
      return 0;
    }
    return size;
  }

  // A location expression as a place, or why kprobe_events cannot read it. `whole_size`: the
  // value's size, which a single trailing DW_OP_piece may name (a struct of one word passed in a
  // register: `DW_OP_reg5; DW_OP_piece 8` is the register itself).
  std::optional<Place> Evaluate(Dwarf_Op* ops, size_t n, std::string* why, Dwarf_Word whole_size = 0) {
    Place p;
    size_t i = 0;
    const uint8_t op = ops[0].atom;
    if (op >= DW_OP_reg0 && op <= DW_OP_reg31) {
      auto r = Register(op - DW_OP_reg0, why);
      if (!r) return std::nullopt;
      p.in_register = true;
      p.reg = *r;
      i = 1;
    } else if (op == DW_OP_regx) {
      auto r = Register(ops[0].number, why);
      if (!r) return std::nullopt;
      p.in_register = true;
      p.reg = *r;
      i = 1;
    } else if ((op >= DW_OP_breg0 && op <= DW_OP_breg31) || op == DW_OP_bregx) {
      const uint64_t regno = op == DW_OP_bregx ? ops[0].number : op - DW_OP_breg0;
      auto r = Register(regno, why);
      if (!r) return std::nullopt;
      p.base = *r;
      p.offset = static_cast<int64_t>(op == DW_OP_bregx ? ops[0].number2 : ops[0].number);
      i = 1;
    } else if (op == DW_OP_fbreg) {
      auto fb = FrameBase(why);
      if (!fb) return std::nullopt;
      p = *fb;
      p.offset += static_cast<int64_t>(ops[0].number);
      i = 1;
    } else if (op == DW_OP_addr) {
      p.is_static = true;
      p.static_addr = ops[0].number;
      i = 1;
    } else if (op == DW_OP_entry_value || op == DW_OP_GNU_entry_value) {
      *why = "here it is known only as its value at the function's entry (DW_OP_entry_value), which no register holds";
      return std::nullopt;
    } else if (op == DW_OP_implicit_pointer || op == DW_OP_GNU_implicit_pointer) {
      *why = "it is a pointer the compiler optimized away (DW_OP_implicit_pointer)";
      return std::nullopt;
    } else if (n == 2 && ops[1].atom == DW_OP_stack_value &&
               ((op >= DW_OP_lit0 && op <= DW_OP_lit31) || op == DW_OP_constu || op == DW_OP_consts ||
                (op >= DW_OP_const1u && op <= DW_OP_const8s))) {
      // A value the compiler knows here (DW_OP_litN / DW_OP_constN; DW_OP_stack_value): an immediate.
      const bool is_signed = op == DW_OP_consts || op == DW_OP_const1s || op == DW_OP_const2s || op == DW_OP_const4s ||
                             op == DW_OP_const8s;
      const uint64_t v = op <= DW_OP_lit31 && op >= DW_OP_lit0 ? op - DW_OP_lit0 : ops[0].number;
      p.in_register = true;
      p.is_constant = true;
      p.reg = is_signed ? StrCat("\\", static_cast<int64_t>(v)) : StrCat("\\", v);
      return p;
    } else if ((op >= DW_OP_lit0 && op <= DW_OP_lit31) || op == DW_OP_constu || op == DW_OP_consts ||
               op == DW_OP_implicit_value) {
      *why = "here it is a constant the compiler computed (a DWARF expression, not a place)";
      return std::nullopt;
    } else {
      *why = StrCat("its location is a DWARF expression kprobe_events has no form for (DW_OP 0x", Hex(op), ")");
      return std::nullopt;
    }
    for (; i < n; ++i) {
      const uint8_t o = ops[i].atom;
      if (o == DW_OP_plus_uconst && !p.in_register) {
        p.offset += static_cast<int64_t>(ops[i].number);
      } else if (o == DW_OP_deref && !p.in_register) {
        // The address is the word at the place computed so far.
        p.base = FetchText(p);
        p.offset = 0;
        p.is_static = false;
      } else if (o == DW_OP_stack_value && !p.in_register && !p.is_static && p.offset == 0 && i + 1 == n) {
        // The value is the register itself (breg N 0; stack_value).
        p.in_register = true;
        p.reg = p.base;
      } else if (o == DW_OP_piece && i + 1 == n && whole_size != 0 && ops[i].number == whole_size) {
        // One piece that is the whole value: the place as it is.
      } else if (o == DW_OP_piece) {
        *why = "it is split into pieces (DW_OP_piece), which one fetch arg cannot join";
        return std::nullopt;
      } else if (o == DW_OP_stack_value) {
        *why = "here it is a value the compiler computes from registers (DW_OP_stack_value), not a place";
        return std::nullopt;
      } else {
        *why = StrCat("its location is a DWARF expression kprobe_events has no form for (DW_OP 0x", Hex(o), ")");
        return std::nullopt;
      }
    }
    return p;
  }

  // DW_AT_frame_base at pc: a register plus an offset (the CFA from the call frame information).
  std::optional<Place> FrameBase(std::string* why) {
    Dwarf_Attribute a;
    Dwarf_Op* ops = nullptr;
    size_t n = 0;
    Dwarf_Die fn = site_.frame;
    if (dwarf_attr(&fn, DW_AT_frame_base, &a) == nullptr || dwarf_getlocation_addr(&a, pc_, &ops, &n, 1) <= 0 ||
        n == 0) {
      *why = "it is on the stack relative to a frame base the function does not describe here";
      return std::nullopt;
    }
    if (n == 1 && ops[0].atom == DW_OP_call_frame_cfa) {
      Dwarf_Frame* frame = nullptr;
      Dwarf_Op* cfa = nullptr;
      size_t cn = 0;
      if (site_.cfi == nullptr || dwarf_cfi_addrframe(site_.cfi, pc_, &frame) != 0) {
        *why = "it is on the stack relative to the call frame address, and the file has no call frame information here";
        return std::nullopt;
      }
      std::unique_ptr<Dwarf_Frame, void (*)(void*)> owned(frame, free);
      if (dwarf_frame_cfa(frame, &cfa, &cn) != 0 || cn == 0) {
        *why = "it is on the stack relative to a call frame address the call frame information does not give";
        return std::nullopt;
      }
      std::string inner;
      auto p = Evaluate(cfa, cn, &inner);
      if (!p || p->in_register || p->is_static) {
        *why = "it is on the stack relative to a call frame address that is no register plus an offset";
        return std::nullopt;
      }
      return p;
    }
    std::string inner;
    auto p = Evaluate(ops, n, &inner);
    if (!p || p->is_static) {
      *why = "it is on the stack relative to a frame base kprobe_events cannot compute";
      return std::nullopt;
    }
    if (p->in_register) {  // DW_OP_reg N as a frame base: the address is the register's value
      p->base = p->reg;
      p->in_register = false;
      p->offset = 0;
    }
    return p;
  }

  // The fetch arg that yields the value at `p` (a register's or the memory's).
  std::string FetchText(const Place& p) {
    if (p.in_register) return p.reg;
    if (p.is_static) {
      std::string sym = ctx_.static_form ? ctx_.static_form(p.static_addr + static_cast<uint64_t>(p.offset)) : "";
      return sym.empty() ? StrCat("@0x", Hex(p.static_addr + static_cast<uint64_t>(p.offset))) : "@" + sym;
    }
    return StrCat(Offset(p.offset), "(", p.base, ")");
  }

  // perf's name for an argument given without one: the variable's, or the last member's, with
  // the type appended to a plain variable (":" as "_").
  static std::string DefaultName(const ProbeArg& a) {
    for (auto it = a.fields.rbegin(); it != a.fields.rend(); ++it) {
      if (!it->member.empty()) return it->member;
    }
    return a.type.empty() ? a.var : StrCat(a.var, "_", a.type);
  }

  // A bitfield member's fetch: its containing word at `place` (which holds the member's byte
  // offset) and its bits in it. `bit_position` counts from the start of the aggregate holding it.
  absl::StatusOr<std::string> BitfieldFetch(const std::string& path, Dwarf_Die bitfield, int64_t bit_position,
                                            Place place) {
    Dwarf_Attribute ba;
    Dwarf_Word width = 0;
    dwarf_formudata(dwarf_attr(&bitfield, DW_AT_bit_size, &ba), &width);
    std::optional<Dwarf_Die> bt = RealType(&bitfield);
    const int64_t container = bt ? SizeOf(&*bt) : -1;
    if (container != 1 && container != 2 && container != 4 && container != 8) {
      return absl::OutOfRangeError(StrCat("'", path, "' is a bitfield of a type with no fetchable size"));
    }
    // place.offset already includes the member's byte offset for the non-bitfield part: undo and redo.
    const int64_t cbits = container * 8;
    const int64_t unit = (bit_position / cbits) * container;
    const int64_t bit = bit_position - unit * 8;
    if (bit + static_cast<int64_t>(width) > cbits) {
      return absl::OutOfRangeError(StrCat("'", path, "' straddles two ", cbits, "-bit words"));
    }
    place.offset += unit;
    return StrCat(FetchText(place), ":b", width, "@", bit, "/", cbits);
  }

  // `:string` / `:ustring` of the value `cur` (its real type `type`) at `place`: a char pointer
  // is followed, a char array in memory read where it is.
  absl::StatusOr<std::string> StringFetch(const std::string& path, Dwarf_Die cur, std::optional<Dwarf_Die> type,
                                          const std::string& as, Place place) {
    const int tag = type ? dwarf_tag(&*type) : 0;
    if (tag != DW_TAG_pointer_type && tag != DW_TAG_array_type) {
      return absl::InvalidArgumentError(
          StrCat("'", path, "' (", TypeName(&cur), ") is not a char pointer or array: no :", as));
    }
    std::optional<Dwarf_Die> elem = RealType(&*type);
    const std::string en = elem ? Name(&*elem) : "";
    if (!elem || (en != "char" && en != "unsigned char" && en != "signed char")) {
      return absl::InvalidArgumentError(
          StrCat("'", path, "' (", TypeName(&cur), ") is not a char pointer or array: no :", as));
    }
    if (tag == DW_TAG_pointer_type) {
      place = Place{.base = FetchText(place), .offset = 0};
    } else if (place.in_register) {
      return absl::OutOfRangeError(StrCat("'", path, "' is a char array held in a register: no string to read"));
    }
    return StrCat(FetchText(place), ":", as);
  }

  // The fetch for `a` (its members, index, type) starting from `var` at `place`.
  absl::StatusOr<std::string> FetchOf(const ProbeArg& a, Dwarf_Die var, Place place, std::vector<std::string>& notes) {
    if (place.is_static && (!ctx_.static_form || ctx_.static_form(place.static_addr).empty())) {
      return absl::OutOfRangeError(
          StrCat("'", a.var, "' is static storage (DW_OP_addr) that no kprobe_events symbol ",
                 "names exactly here (a module's: its address is known on the live host only)"));
    }
    if (place.is_constant && !a.fields.empty()) {
      return absl::OutOfRangeError(StrCat("'", a.var, "' is a constant here (", place.reg.substr(1),
                                          ", folded into the code): it has nothing in memory to look into"));
    }
    Dwarf_Die cur = var;  // the DIE whose DW_AT_type is the current value's type
    std::string path = a.var;
    std::optional<Dwarf_Die> bitfield;  // the member DIE when the last field is a bitfield
    int64_t bit_position = 0;
    for (const ingest::ProbeArgField& f : a.fields) {
      std::optional<Dwarf_Die> type = RealType(&cur);
      if (!type) return absl::InvalidArgumentError(StrCat("'", path, "' has no type to look into"));
      const int tag = dwarf_tag(&*type);
      if (f.index) {
        if (tag != DW_TAG_array_type && tag != DW_TAG_pointer_type) {
          return absl::InvalidArgumentError(
              StrCat("'", path, "' (", TypeName(&cur), ") is not an array or a pointer: no [", *f.index, "]"));
        }
        std::optional<Dwarf_Die> elem = RealType(&*type);
        if (!elem) return absl::InvalidArgumentError(StrCat("'", path, "' points to void: no [", *f.index, "]"));
        const int64_t size = SizeOf(&*elem);
        if (size <= 0) return absl::InvalidArgumentError(StrCat("'", path, "''s elements have no size"));
        if (tag == DW_TAG_pointer_type) {
          place = Place{.base = FetchText(place), .offset = static_cast<int64_t>(*f.index) * size};
        } else {
          if (place.in_register) {
            return absl::OutOfRangeError(StrCat("'", path, "' is an array in a register: no element is addressable"));
          }
          place.offset += static_cast<int64_t>(*f.index) * size;
        }
        // The element's type is the array's (or pointer's) own DW_AT_type: step onto that DIE.
        cur = *type;
        path += StrCat("[", *f.index, "]");
        bitfield.reset();
        continue;
      }
      Dwarf_Die agg = *type;
      if (tag == DW_TAG_pointer_type) {
        if (!f.arrow) {
          return absl::InvalidArgumentError(StrCat("'", path, "' is a pointer (", TypeName(&cur), "): use '->",
                                                   f.member, "', not '.", f.member, "'"));
        }
        std::optional<Dwarf_Die> pointee = RealType(&*type);
        if (!pointee) return absl::InvalidArgumentError(StrCat("'", path, "' points to void: no member ", f.member));
        agg = *pointee;
        place = Place{.base = FetchText(place), .offset = 0};
      } else if (f.arrow) {
        return absl::InvalidArgumentError(StrCat("'", path, "' is not a pointer (", TypeName(&cur), "): use '.",
                                                 f.member, "', not '->", f.member, "'"));
      } else if (place.in_register) {
        return absl::OutOfRangeError(
            StrCat("'", path, "' (", TypeName(&cur),
                   ") is held in a register here, not in memory: its members have no address"));
      }
      const int atag = dwarf_tag(&agg);
      if (atag != DW_TAG_structure_type && atag != DW_TAG_union_type) {
        return absl::InvalidArgumentError(
            StrCat("'", path, "' is not a struct or union (", TypeName(&cur), "): no member ", f.member));
      }
      int64_t off = 0;
      std::optional<Dwarf_Die> member = FindMember(&agg, f.member, off, bit_position);
      if (!member) {
        return absl::InvalidArgumentError(StrCat("'", path, "' (", TypeName(&cur), ") has no member '", f.member, "'"));
      }
      place.offset += off;
      Dwarf_Attribute ba;
      if (dwarf_attr(&*member, DW_AT_bit_size, &ba) != nullptr) {
        bitfield = *member;
      } else {
        bitfield.reset();
      }
      cur = *member;
      path += StrCat(f.arrow ? "->" : ".", f.member);
    }

    // The type: a cast given, else the value's own.
    if (bitfield && (a.type.empty())) return BitfieldFetch(path, *bitfield, bit_position, place);
    std::optional<Dwarf_Die> type = RealType(&cur);
    if (a.type == "string" || a.type == "ustring") return StringFetch(path, cur, type, a.type, place);
    if (!a.type.empty() && a.type != "u" && a.type != "s" && a.type != "x")
      return StrCat(FetchText(place), ":", a.type);
    if (!type) return FetchText(place);
    int64_t size = SizeOf(&*type);
    if (size <= 0) return FetchText(place);
    if (size > 8) {
      notes.push_back(StrCat("'", path, "' (", TypeName(&cur), ") is ", size * 8, " bits: its first 64 are fetched"));
      size = 8;
    }
    if (size != 1 && size != 2 && size != 4 && size != 8) size = 8;
    char prefix = IsSigned(&*type) ? 's' : 'x';
    if (!a.type.empty()) prefix = a.type[0];
    return StrCat(FetchText(place), ":", std::string(1, prefix), size * 8);
  }

  // The member `name` of struct/union `agg`, through unnamed members (anonymous structs and
  // unions): its byte offset from the aggregate's start into `off`, and its bit position (for
  // a bitfield: from the aggregate's start, little-endian) into `bits`.
  std::optional<Dwarf_Die> FindMember(Dwarf_Die* agg, const std::string& name, int64_t& off, int64_t& bits,
                                      int depth = 0) {
    Dwarf_Die m;
    if (depth > 16 || dwarf_child(agg, &m) != 0) return std::nullopt;
    const bool is_union = dwarf_tag(agg) == DW_TAG_union_type;
    do {
      if (dwarf_tag(&m) != DW_TAG_member) continue;
      const char* mn = dwarf_diename(&m);
      int64_t moff = 0, mbits = 0;
      if (!is_union) MemberOffset(&m, moff, mbits);
      if (mn != nullptr && name == mn) {
        Dwarf_Attribute a;
        if (dwarf_attr(&m, DW_AT_bit_size, &a) != nullptr) {
          off = 0;  // the bitfield's unit is placed from its bit position
          bits = mbits;
        } else {
          off = moff;
          bits = moff * 8;
        }
        return m;
      }
      if (mn == nullptr) {
        std::optional<Dwarf_Die> t = RealType(&m);
        if (!t) continue;
        int64_t inner = 0, inner_bits = 0;
        if (auto found = FindMember(&*t, name, inner, inner_bits, depth + 1)) {
          off = moff + inner;
          bits = moff * 8 + inner_bits;
          return found;
        }
      }
    } while (dwarf_siblingof(&m, &m) == 0);
    return std::nullopt;
  }

  // A member's byte offset and bit position from its aggregate's start: DW_AT_data_member_location
  // (a constant, or DW_OP_plus_uconst), DW_AT_data_bit_offset (DWARF 4+ bitfields) or
  // DW_AT_bit_offset (DWARF 2-3: counted from the most significant bit of a DW_AT_byte_size unit).
  static void MemberOffset(Dwarf_Die* m, int64_t& off, int64_t& bits) {
    Dwarf_Attribute a;
    Dwarf_Word v = 0;
    off = 0;
    if (dwarf_attr(m, DW_AT_data_member_location, &a) != nullptr) {
      if (dwarf_formudata(&a, &v) == 0) {
        off = static_cast<int64_t>(v);
      } else {
        Dwarf_Op* ops = nullptr;
        size_t n = 0;
        if (dwarf_getlocation(&a, &ops, &n) == 0 && n == 1 && ops[0].atom == DW_OP_plus_uconst) {
          off = static_cast<int64_t>(ops[0].number);
        }
      }
    }
    bits = off * 8;
    if (dwarf_formudata(dwarf_attr(m, DW_AT_data_bit_offset, &a), &v) == 0) {
      bits = static_cast<int64_t>(v);
      return;
    }
    Dwarf_Word bit_offset = 0, bit_size = 0;
    if (dwarf_formudata(dwarf_attr(m, DW_AT_bit_offset, &a), &bit_offset) == 0 &&
        dwarf_formudata(dwarf_attr(m, DW_AT_bit_size, &a), &bit_size) == 0) {
      int byte_size = dwarf_bytesize(m);
      if (byte_size <= 0) {
        std::optional<Dwarf_Die> t = RealType(m);
        byte_size = t ? static_cast<int>(SizeOf(&*t)) : 0;
      }
      bits = off * 8 + byte_size * 8 - static_cast<int64_t>(bit_offset) - static_cast<int64_t>(bit_size);
    }
  }

  std::vector<ScopeVariable> Scope() {
    std::vector<Dwarf_Die> vars;
    CollectVars(&site_.function, true, 0, vars);
    std::vector<ScopeVariable> out;
    for (Dwarf_Die& v : vars) {
      ScopeVariable s;
      s.name = Name(&v);
      s.type = TypeName(&v);
      s.parameter = dwarf_tag(&v) == DW_TAG_formal_parameter;
      std::string why;
      if (auto place = LocationAt(&v, &why)) {
        ProbeArg one;
        one.kind = ProbeArg::Kind::kVariable;
        one.var = s.name;
        one.text = s.name;
        std::vector<std::string> notes;
        auto f = FetchOf(one, v, *place, notes);
        if (f.ok()) {
          s.here = true;
          s.fetch = *f;
        } else {
          s.why = std::string(f.status().message());
        }
      } else {
        s.why = why;
      }
      Dwarf_Attribute a;
      if (dwarf_attr_integrate(&v, DW_AT_location, &a) != nullptr) {
        Dwarf_Addr base = 0, start = 0, end = 0;
        Dwarf_Op* expr = nullptr;
        size_t len = 0;
        ptrdiff_t off = 0;
        while ((off = dwarf_getlocations(&a, off, &base, &start, &end, &expr, &len)) > 0 && s.ranges.size() < 64) {
          end = std::min(end, FunctionEnd());
          if (len == 0 || start >= end || end <= site_.symbol) continue;
          const uint64_t lo = start >= site_.symbol ? start - site_.symbol : 0, hi = end - site_.symbol;
          if (!s.ranges.empty() && s.ranges.back().second == lo) {
            s.ranges.back().second = hi;  // one range, whatever the register it moves to
          } else {
            s.ranges.emplace_back(lo, hi);
          }
        }
      }
      out.push_back(std::move(s));
    }
    return out;
  }

 private:
  FetchSite site_;
  const FetchContext& ctx_;
  Dwarf_Addr pc_ = 0;
};

}  // namespace

absl::StatusOr<CompiledArgs> CompileFetchArgs(const FetchSite& site, const std::vector<ingest::ProbeArg>& args,
                                              const FetchContext& ctx) {
  if (ctx.arch == nullptr) return absl::FailedPreconditionError("the kernel's architecture is not known");
  Compiler c(site, ctx);
  return c.Compile(args);
}

absl::StatusOr<std::vector<ScopeVariable>> ScopeVariables(const FetchSite& site, const FetchContext& ctx) {
  if (ctx.arch == nullptr) return absl::FailedPreconditionError("the kernel's architecture is not known");
  Compiler c(site, ctx);
  return c.Scope();
}

}  // namespace symdex::debuginfo
