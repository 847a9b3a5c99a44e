#include "server/ingest/kernel_log.h"

#include <algorithm>

#include "server/common/strings.h"

namespace symdex::ingest {
namespace {

// Below this an address is not a kernel text address: [<0>] (/proc/PID/stack without
// CAP_SYSLOG), hashed %p values ([<000000006a1b2c3d>]), user-space addresses in perf output.
constexpr uint64_t kKernelHalf = 0xffff800000000000ull;

struct Token {
  std::string_view text;
  size_t pos = 0;  // in the line
};

std::vector<Token> Tokens(std::string_view line) {
  std::vector<Token> out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    size_t j = i;
    while (j < line.size() && line[j] != ' ' && line[j] != '\t') ++j;
    if (j > i) out.push_back({line.substr(i, j - i), i});
    i = j;
  }
  return out;
}

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
std::optional<uint64_t> Hex(std::string_view s) { return ParseHex(s); }

std::optional<uint64_t> Decimal(std::string_view s) {
  if (s.empty() || s.size() > 19) return std::nullopt;
  uint64_t v = 0;
  for (char c : s) {
    if (!IsDigit(c)) return std::nullopt;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  return v;
}

bool IsSymbolName(std::string_view s) {
  if (s.empty() || s.size() > kMaxFrameSymbolLength || IsDigit(s.front())) return false;
  return std::all_of(s.begin(), s.end(), IsFrameSymbolChar);
}

// NAME+0xOFF/0xSIZE, after an optional "PREFIX:" (RIP: 0010:NAME...); returns where NAME starts.
std::optional<size_t> SymbolOffsetSize(std::string_view tok) {
  size_t start = tok.rfind(':');
  start = start == std::string_view::npos ? 0 : start + 1;
  std::string_view t = tok.substr(start);
  size_t plus = t.rfind("+0x");
  size_t slash = t.rfind("/0x");
  if (plus == std::string_view::npos || slash == std::string_view::npos || slash < plus) return std::nullopt;
  if (!IsSymbolName(t.substr(0, plus))) return std::nullopt;
  if (!Hex(t.substr(plus + 1, slash - plus - 1)) || !Hex(t.substr(slash + 1))) return std::nullopt;
  return start;
}

// A line that sits inside a kernel stack without being a frame.
enum class Inside { kNo, kYes, kBreak };
Inside InsideLine(const std::vector<Token>& toks) {
  if (toks.empty()) return Inside::kNo;
  for (const Token& t : toks) {
    std::string_view s = t.text;
    if (s == "<IRQ>" || s == "</IRQ>" || s == "<NMI>" || s == "</NMI>" || s == "<SOFTIRQ>" || s == "</SOFTIRQ>") {
      return Inside::kBreak;
    }
    if (s == "<TASK>" || s == "</TASK>") return Inside::kYes;
  }
  for (size_t i = 0; i + 1 < toks.size(); ++i) {
    if (toks[i].text == "Call" && (toks[i + 1].text.starts_with("Trace") || toks[i + 1].text.starts_with("trace"))) {
      return Inside::kYes;
    }
  }
  // Register dumps between RIP: and Call Trace: (x86-64 __show_regs), pc : and Call trace:
  // (arm64 __show_regs: "sp : ...", "x29: ... x28: ...", "pstate: ...").
  static constexpr std::string_view kRegs[] = {
      "Code:", "RSP:", "RAX:", "RDX:", "RBP:", "R10:",  "R13:",      "FS:",
      "CS:",   "CR2:", "DR0:", "DR3:", "DR6:", "PKRU:", "ORIG_RAX:", "pstate:"};
  for (size_t i = 0; i < toks.size(); ++i) {
    std::string_view t = toks[i].text;
    for (std::string_view r : kRegs) {
      if (t == r) return Inside::kYes;
    }
    if (t == "sp" && i + 1 < toks.size() && toks[i + 1].text == ":") return Inside::kYes;
    // x29: .. x10:, x9 : .. x0 : (arm64's general registers, "x%-2d: ", several a line)
    std::string_view reg = t.ends_with(':') ? t.substr(0, t.size() - 1) : t;
    const bool colon = t.ends_with(':') || (i + 1 < toks.size() && toks[i + 1].text == ":");
    if (colon && reg.size() >= 2 && reg.size() <= 3 && reg.front() == 'x' &&
        std::all_of(reg.begin() + 1, reg.end(), IsDigit)) {
      return Inside::kYes;
    }
  }
  return Inside::kNo;
}

std::string Normalize(const FrameText& f) {
  std::string out;
  if (f.address) out = fmt::format("[<{:016x}>] ", *f.address);
  if (f.symbol.empty()) return f.address ? fmt::format("0x{:x}", *f.address) : std::string();
  if (f.unreliable) out += "? ";
  out += fmt::format("{}+0x{:x}", f.symbol, f.offset);
  if (f.size) out += fmt::format("/0x{:x}", *f.size);
  if (!f.module.empty()) {
    out += " [" + f.module;
    if (!f.module_build_id.empty()) out += " " + f.module_build_id;
    out += "]";
  }
  if (!f.source_file.empty()) out += fmt::format(" ({}:{})", f.source_file, f.source_line);
  return out;
}

enum class Form { kKernel, kRegs, kLinkRegister, kPerf, kBpftrace, kFtrace, kEntry };

// arm64's exception vectors (entry.S's entry_handler: el1h_64_irq, el0t_64_sync, el0t_32_fiq, ...;
// before 5.12 el1_irq, el0_sync, ...). The frame record the vector builds in pt_regs holds the
// interrupted pc where a return address would be, so the unwinder prints that pc as the next
// frame: the interrupted instruction itself (NAME+0x0 is common), after which the interrupted
// function's own caller may be missing (its frame record not yet made).
bool ArmExceptionVector(std::string_view name) {
  if (!name.starts_with("el0") && !name.starts_with("el1")) return false;
  name.remove_prefix(3);
  if (name.starts_with('t') || name.starts_with('h')) name.remove_prefix(1);
  if (name.starts_with("_64") || name.starts_with("_32")) name.remove_prefix(3);
  return name == "_sync" || name == "_irq" || name == "_fiq" || name == "_error";
}

// The frame on a line, if any.
std::optional<std::pair<LogFrame, Form>> FrameOn(std::string_view line, const std::vector<Token>& toks) {
  if (toks.empty()) return std::nullopt;
  // bpftrace kstack: the whole line is NAME+DECIMAL.
  if (toks.size() == 1) {
    std::string_view t = toks[0].text;
    size_t plus = t.rfind('+');
    if (plus != std::string_view::npos && plus > 0 && !t.substr(plus + 1).starts_with("0x") &&
        IsSymbolName(t.substr(0, plus))) {
      if (std::optional<uint64_t> off = Decimal(t.substr(plus + 1))) {
        LogFrame lf;
        lf.begin = toks[0].pos;
        lf.end = toks[0].pos + t.size();
        lf.frame.symbol = std::string(t.substr(0, plus));
        lf.frame.offset = *off;
        return std::make_pair(std::move(lf), Form::kBpftrace);
      }
    }
  }
  // perf script: ADDR SYMBOL[+0xOFF] (DSO), the DSO the kernel or a module.
  for (size_t i = 0; i + 2 < toks.size(); ++i) {
    std::string_view a = toks[i].text, d = toks[i + 2].text;
    if (a.size() < 8 || !d.starts_with("([") || !d.ends_with("])")) continue;
    std::optional<uint64_t> addr = Hex(a);
    if (!addr || *addr < kKernelHalf) continue;
    std::string_view dso = d.substr(2, d.size() - 4);
    std::string_view sym = toks[i + 1].text;
    FrameText f;
    f.address = addr;
    size_t plus = sym.rfind('+');
    std::optional<uint64_t> off;
    if (plus != std::string_view::npos) {
      std::string_view o = sym.substr(plus + 1);
      off = o.starts_with("0x") ? Hex(o) : Decimal(o);
      if (off) sym = sym.substr(0, plus);
    }
    if (!IsSymbolName(sym) && sym != "[unknown]") continue;
    if (dso == "unknown") continue;  // perf could not place it (a bogus unwind, BPF): not ours to name
    if (dso != "kernel.kallsyms") {
      bool mod = !dso.empty() && dso.size() <= 64;
      for (char c : dso) mod = mod && (IsFrameSymbolChar(c) || c == '-');
      if (!mod) continue;
      f.module = std::string(dso);
    }
    if (IsSymbolName(sym) && off) {
      f.symbol = std::string(sym);
      f.offset = *off;
    }
    LogFrame lf;
    lf.begin = toks[i].pos;
    lf.end = toks[i + 2].pos + d.size();
    lf.frame = std::move(f);
    return std::make_pair(std::move(lf), Form::kPerf);
  }
  // NAME+0xOFF/0xSIZE, with what may surround it: "?", "[<ADDR>]" before, "[MOD ID]" after.
  for (size_t i = 0; i < toks.size(); ++i) {
    std::optional<size_t> name_at = SymbolOffsetSize(toks[i].text);
    if (!name_at) continue;
    size_t first = i;
    while (first > 0 && (toks[first - 1].text == "?" ||
                         (toks[first - 1].text.starts_with("[<") && toks[first - 1].text.ends_with(">]")))) {
      --first;
    }
    size_t last = i;
    if (i + 1 < toks.size() && toks[i + 1].text.starts_with("[") && !toks[i + 1].text.starts_with("[<")) {
      last = i + 1;
      if (!toks[last].text.ends_with("]") && last + 1 < toks.size() && toks[last + 1].text.ends_with("]")) ++last;
    }
    // CONFIG_KALLSYMS_LINEINFO's "(FILE:LINE)" after it: part of the frame (ParseFrameText reads it).
    if (last + 1 < toks.size() && toks[last + 1].text.starts_with("(") && !toks[last + 1].text.starts_with("([") &&
        toks[last + 1].text.ends_with(")")) {
      ++last;
    }
    size_t begin = first == i ? toks[i].pos + *name_at : toks[first].pos;
    size_t end = toks[last].pos + toks[last].text.size();
    absl::StatusOr<FrameText> f = ParseFrameText(line.substr(begin, end - begin));
    if (!f.ok() || f->symbol.empty()) continue;
    if (f->address && *f->address < kKernelHalf) f->address.reset();
    LogFrame lf;
    lf.begin = begin;
    lf.end = end;
    lf.frame = std::move(*f);
    Form form = Form::kKernel;
    for (size_t k = 0; k < i; ++k) {
      std::string_view t = toks[k].text;
      if (t == "RIP:" || t == "WARNING:" || t == "BUG:" || t.starts_with("RIP:")) form = Form::kRegs;
      if (t == "=>") form = Form::kFtrace;
      // arm64 __show_regs: "pc : NAME+..." and "lr : NAME+...".
      if (k + 1 < i && toks[k + 1].text == ":" && (t == "pc" || t == "lr")) {
        form = t == "pc" ? Form::kRegs : Form::kLinkRegister;
      }
    }
    if (toks[i].text.starts_with("RIP:")) form = Form::kRegs;
    // The function tracer's "func+0x0/0x30 <-parent+0x18/0x40": the traced function's entry.
    for (size_t k = last + 1; k < toks.size(); ++k) {
      if (toks[k].text.starts_with("<-")) form = Form::kEntry;
    }
    return std::make_pair(std::move(lf), form);
  }
  return std::nullopt;
}

// "Linux version 6.1.0-57-cloud-amd64 (...)", "... Comm: sh Not tainted 6.1.0-57-cloud-amd64 #1 ...".
std::string ReleaseOn(const std::vector<Token>& toks) {
  for (size_t i = 0; i + 2 < toks.size(); ++i) {
    if (toks[i].text == "Linux" && toks[i + 1].text == "version") return std::string(toks[i + 2].text);
  }
  bool comm = false, tainted = false;
  for (size_t i = 0; i < toks.size(); ++i) {
    std::string_view t = toks[i].text;
    comm = comm || t == "Comm:";
    tainted = tainted || t == "tainted" || t == "Tainted:";
    if (comm && tainted && i > 0 && t.size() >= 2 && t.front() == '#' && Decimal(t.substr(1))) {
      std::string_view rel = toks[i - 1].text;
      if (rel.size() <= 128 && rel.find('.') != std::string_view::npos) return std::string(rel);
    }
  }
  return {};
}

}  // namespace

absl::StatusOr<KernelLog> ScanKernelLog(std::string_view text) {
  if (text.size() > kMaxLogBytes) {
    return absl::InvalidArgumentError(
        StrCat("the log is ", text.size(), " bytes; the limit is ", kMaxLogBytes, " (split it)"));
  }
  KernelLog out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    std::string_view line = text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    if (line.ends_with('\r')) line.remove_suffix(1);
    out.lines.push_back(line);
    if (nl == std::string_view::npos) break;
    pos = nl + 1;
  }
  bool in_trace = false;
  // The last reliable frame waiting for its caller (kNone: none). (Not std::optional: GCC 12 sees
  // its value read uninitialized where it is not.)
  constexpr size_t kNone = SIZE_MAX;
  size_t pending = kNone;
  Form trace_form = Form::kKernel;
  size_t frames_in_trace = 0;
  // arm64: a "pc :" frame was seen in this stack, and a "Call trace:" since: its next frame is
  // that pc again, not a return address.
  bool pc_seen = false, pc_first = false;
  // The previous frame was an arm64 exception vector: this one is the interrupted pc.
  bool after_vector = false;
  for (size_t n = 0; n < out.lines.size(); ++n) {
    std::string_view line = out.lines[n];
    if (line.size() > kMaxFrameLineLength) {
      in_trace = false;
      pending = kNone;
      continue;
    }
    std::vector<Token> toks = Tokens(line);
    if (std::string rel = ReleaseOn(toks); !rel.empty()) {
      if (std::find(out.releases.begin(), out.releases.end(), rel) == out.releases.end()) out.releases.push_back(rel);
    }
    auto found = FrameOn(line, toks);
    if (!found) {
      Inside inside = InsideLine(toks);
      if (inside == Inside::kNo) {
        in_trace = false;
        pending = kNone;
      } else if (inside == Inside::kBreak) {
        pending = kNone;
      } else if (!in_trace) {
        in_trace = true;  // "Call Trace:" or <TASK> opens a stack
        ++out.traces;
        frames_in_trace = 0;
        pending = kNone;
        trace_form = Form::kKernel;
        pc_seen = false;
        after_vector = false;
      }
      if (inside != Inside::kNo) {
        for (size_t i = 0; i + 1 < toks.size(); ++i) {
          if (toks[i].text == "Call" && toks[i + 1].text == "trace:" && pc_seen) pc_first = true;
        }
      }
      if (inside == Inside::kNo) pc_seen = pc_first = after_vector = false;
      continue;
    }
    if (out.frames.size() >= kMaxLogFrames) {
      return absl::InvalidArgumentError(StrCat("more than ", kMaxLogFrames, " frames in one log (split it)"));
    }
    auto& [lf, form] = *found;
    if (!in_trace) {
      in_trace = true;
      ++out.traces;
      frames_in_trace = 0;
      pending = kNone;
      trace_form = form;
      pc_seen = pc_first = after_vector = false;
    }
    lf.line = n;
    lf.trace = out.traces - 1;
    lf.normalized = Normalize(lf.frame);
    lf.regs = form == Form::kRegs;
    // The first frame of a sampled stack (perf, bpftrace, ftrace) is where the sample was taken,
    // not a return address; kernel stack dumps list return addresses only, besides RIP: (and
    // arm64's pc, printed again first in its Call trace).
    const bool sampled = trace_form == Form::kPerf || trace_form == Form::kBpftrace || trace_form == Form::kFtrace;
    const bool interrupted = after_vector && form == Form::kKernel && !lf.frame.unreliable;
    lf.return_address =
        !lf.regs && form != Form::kEntry && !(sampled && frames_in_trace == 0) && !pc_first && !interrupted;
    pc_first = false;
    if (lf.regs) pc_seen = true;
    if (!lf.frame.unreliable) after_vector = form == Form::kKernel && ArmExceptionVector(lf.frame.symbol);
    ++frames_in_trace;
    const size_t idx = out.frames.size();
    if (lf.regs) pending = kNone;  // a register dump: the frames before it ran in another context
    if (form == Form::kEntry || form == Form::kLinkRegister || interrupted) {
      // Each function-tracer line stands alone; so does arm64's lr, and the pc an exception
      // interrupted (no call led to it, and the frame after it may be its caller's caller).
      pending = kNone;
    } else if (!lf.frame.unreliable) {
      if (pending != kNone) out.frames[pending].caller = idx;
      pending = idx;
    }
    out.frames.push_back(std::move(lf));
  }
  if (!out.releases.empty()) out.release = out.releases.front();
  return out;
}

}  // namespace symdex::ingest
