// Load generator for symdexd (gRPC sync API, closed loop: each client sends its next call when the
// previous one returned). A benchmark, not a test; tests/bench/daemon_load.sh drives it end to end.
//
//   daemon_load --connect unix:/run/symdex.sock --rpc resolve --clients 16 --seconds 30 --inputs specs.txt
//   daemon_load --connect 127.0.0.1:7070 --rpc symbolize --batch 64 --inputs addrs.txt --json
//   daemon_load --connect unix:S --rpc symbolize-all --batch 1024 --passes 2 --inputs addrs.txt
//
// --rpc which|resolve|symbolize: N clients, one channel (its own connection) each, for --seconds;
//   each client cycles through the inputs (one per line: a name for Which, a spec for Resolve, a hex
//   address for Symbolize) from its own starting offset. Every call's latency is recorded (per-thread
//   vectors merged at the end); prints calls/s, p50/p90/p99/p99.9/max and the count of each status
//   code. For Resolve, ABORTED (ambiguous) and NOT_FOUND are answers, not failures: they are counted
//   apart from OK and from errors. Symbolize sends --batch addresses per call (default 64).
// --rpc health: grpc.health.v1.Health/Check in the same loop (no --inputs): an empty RPC, the ceiling
//   the gRPC stack, the machine and this client allow; the other RPCs' numbers read against it.
// --rpc list-targets: ListTargets in the same loop (no --inputs).
// --max-metadata-kb N: raise the client's limit on received metadata (gRPC default 8 KB); an
//   ABORTED Resolve carries its candidates in the status details, which travel as metadata.
// --rate QPS: open loop instead: the clients together offer QPS calls/s on a fixed schedule and
//   latency counts from when each call was due (no coordinated omission); shows p99 at a given load.
// --warmup S: run S seconds first and count nothing from them.
// --rpc symbolize-all: one client sends every address once in batches of --batch (default 1024),
//   --passes times, and prints each pass's wall time. --stream: over one SymbolizeStream, the
//   batches pipelined (a writer thread sends while the answers are read), as a frontend that
//   streams addresses would; without it, one unary Symbolize call after another.
// --rpc frames-all: as a fleet frontend holding one connection: every address sent once as
//   SymbolizeFrames requests of --batch frames (default: all of them, at most 65,536) naming the
//   kernel by --kernel-build-id (also sent as the symdex-build-id header a proxy routes on) with
//   --kaslr-offset (default 0), --passes times; prints each pass's wall time. --stream: over one
//   SymbolizeFramesStream, the batches pipelined.
// --check-canonical (Resolve): count OK answers whose canonical spec differs from the spec sent
//   (inputs that are canonical specs must come back unchanged).
// --json: one JSON object on stdout (the human-readable table then goes to stderr).
// Exit code: 0 when no call failed (OK, or for Resolve also ABORTED/NOT_FOUND), 1 otherwise, 2 usage.
// Over ~700 lines: a self-contained benchmark program (options, workloads, report) meant to be
// read in one piece.
#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/client_unary_call.h>
#include <grpcpp/impl/rpc_method.h>
#include <sys/resource.h>

#include <algorithm>
#include <barrier>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "symdex/v1/symdex.grpc.pb.h"

namespace {

double CpuSeconds() {  // this process, user + system
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

using Clock = std::chrono::steady_clock;
using symdex::v1::SymbolService;

struct Options {
  std::string connect;
  std::string rpc;
  int clients = 16;
  double seconds = 30;
  double warmup = 0;
  double rate = 0;  // total calls/s offered (open loop); 0 = closed loop
  std::string inputs;
  int batch = 0;  // 0: per-mode default
  std::string target;
  bool json = false;
  bool exact = false;
  bool check_canonical = false;
  int passes = 1;
  bool stream = false;          // symbolize-all through SymbolizeStream: batches pipelined
  std::string kernel_build_id;  // frames-all
  int64_t kaslr_offset = 0;
  int deadline_ms = 10000;
  int max_metadata_kb = 0;  // 0: gRPC's default limit on received metadata (status details ride in it)
};

[[noreturn]] void Usage(const char* msg) {
  if (msg != nullptr) std::fprintf(stderr, "daemon_load: %s\n", msg);
  std::fprintf(stderr,
               "usage: daemon_load --connect unix:PATH|HOST:PORT\n"
               "                   --rpc which|resolve|symbolize|symbolize-all|frames-all|list-targets|health\n"
               "                   --inputs FILE [--clients 16] [--seconds 30] [--warmup S] [--batch N]\n"
               "                   [--rate QPS] [--target NAME] [--passes N] [--stream] [--exact]\n"
               "                   [--check-canonical] [--deadline-ms 10000] [--max-metadata-kb N] [--json]\n"
               "                   [--kernel-build-id HEX] [--kaslr-offset N]\n");
  std::exit(2);
}

Options Parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto val = [&]() -> std::string {
      if (i + 1 >= argc) Usage(("missing value for " + a).c_str());
      return argv[++i];
    };
    if (a == "--connect")
      o.connect = val();
    else if (a == "--rpc")
      o.rpc = val();
    else if (a == "--clients")
      o.clients = std::atoi(val().c_str());
    else if (a == "--seconds")
      o.seconds = std::atof(val().c_str());
    else if (a == "--rate")
      o.rate = std::atof(val().c_str());
    else if (a == "--warmup")
      o.warmup = std::atof(val().c_str());
    else if (a == "--inputs")
      o.inputs = val();
    else if (a == "--batch")
      o.batch = std::atoi(val().c_str());
    else if (a == "--target")
      o.target = val();
    else if (a == "--passes")
      o.passes = std::atoi(val().c_str());
    else if (a == "--stream")
      o.stream = true;
    else if (a == "--kernel-build-id")
      o.kernel_build_id = val();
    else if (a == "--kaslr-offset")
      o.kaslr_offset = std::strtoll(val().c_str(), nullptr, 0);
    else if (a == "--max-metadata-kb")
      o.max_metadata_kb = std::atoi(val().c_str());
    else if (a == "--deadline-ms")
      o.deadline_ms = std::atoi(val().c_str());
    else if (a == "--json")
      o.json = true;
    else if (a == "--exact")
      o.exact = true;
    else if (a == "--check-canonical")
      o.check_canonical = true;
    else if (a == "-h" || a == "--help")
      Usage(nullptr);
    else
      Usage(("unknown argument " + a).c_str());
  }
  if (o.connect.empty() || o.rpc.empty()) Usage("--connect and --rpc are required");
  if (o.rpc != "which" && o.rpc != "resolve" && o.rpc != "symbolize" && o.rpc != "symbolize-all" &&
      o.rpc != "frames-all" && o.rpc != "list-targets" && o.rpc != "health")
    Usage("--rpc must be which, resolve, symbolize, symbolize-all, frames-all, list-targets or health");
  if (o.rpc == "frames-all" && o.kernel_build_id.empty()) Usage("frames-all needs --kernel-build-id");
  if (o.inputs.empty() && o.rpc != "list-targets" && o.rpc != "health") Usage("--inputs is required");
  if (o.clients < 1 || o.seconds <= 0 || o.passes < 1 || o.warmup < 0 || o.rate < 0 || o.deadline_ms < 1)
    Usage("bad number");
  if (o.batch == 0) o.batch = o.rpc == "symbolize-all" ? 1024 : o.rpc == "frames-all" ? 65536 : 64;
  if (o.batch < 1 || o.batch > 65536) Usage("--batch must be 1..65536");
  return o;
}

std::vector<std::string> ReadLines(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    std::fprintf(stderr, "daemon_load: cannot open %s\n", path.c_str());
    std::exit(2);
  }
  std::vector<std::string> out;
  std::string line;
  while (std::getline(in, line)) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.pop_back();
    size_t b = line.find_first_not_of(" \t");
    if (b == std::string::npos || line[b] == '#') continue;
    out.push_back(line.substr(b));
  }
  if (out.empty()) {
    std::fprintf(stderr, "daemon_load: %s has no inputs\n", path.c_str());
    std::exit(2);
  }
  return out;
}

std::vector<uint64_t> ParseAddresses(const std::vector<std::string>& lines) {
  std::vector<uint64_t> out;
  out.reserve(lines.size());
  for (const auto& l : lines) {
    const char* s = l.c_str();
    if (l.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) s += 2;
    char* end = nullptr;
    errno = 0;
    unsigned long long v = std::strtoull(s, &end, 16);
    if (errno != 0 || end == s || (*end != '\0' && *end != ' ' && *end != '\t')) {
      std::fprintf(stderr, "daemon_load: not a hex address: '%s'\n", l.c_str());
      std::exit(2);
    }
    out.push_back(v);
  }
  return out;
}

std::shared_ptr<grpc::Channel> MakeChannel(const Options& o, int id) {
  grpc::ChannelArguments args;
  // A distinct argument set plus a local subchannel pool: every client gets its own connection.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetInt("grpc.channel_id", id);
  args.SetInt(GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH, -1);
  args.SetInt(GRPC_ARG_MAX_SEND_MESSAGE_LENGTH, -1);
  if (o.max_metadata_kb > 0) args.SetInt(GRPC_ARG_MAX_METADATA_SIZE, o.max_metadata_kb * 1024);
  return grpc::CreateCustomChannel(o.connect, grpc::InsecureChannelCredentials(), args);
}

bool WaitConnected(const std::shared_ptr<grpc::Channel>& ch, int id) {
  if (ch->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(10))) return true;
  std::fprintf(stderr, "daemon_load: client %d: could not connect within 10 s (channel state %d)\n", id,
               static_cast<int>(ch->GetState(false)));
  return false;
}

const char* CodeName(int c) {
  static const char* const kNames[] = {
      "OK",        "CANCELLED",      "UNKNOWN",           "INVALID_ARGUMENT",   "DEADLINE_EXCEEDED",
      "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
      "ABORTED",   "OUT_OF_RANGE",   "UNIMPLEMENTED",     "INTERNAL",           "UNAVAILABLE",
      "DATA_LOSS", "UNAUTHENTICATED"};
  return c >= 0 && c < 17 ? kNames[c] : "?";
}

// Whether a status is an answer (not a failure) for this RPC.
bool IsAnswer(const std::string& rpc, grpc::StatusCode c) {
  if (c == grpc::StatusCode::OK) return true;
  return rpc == "resolve" && (c == grpc::StatusCode::ABORTED || c == grpc::StatusCode::NOT_FOUND);
}

struct ThreadResult {
  std::vector<uint64_t> lat_ns;  // measured calls only (after warm-up)
  uint64_t codes[17] = {};
  uint64_t other_codes = 0;
  std::map<int, std::string> first_message;  // first error message per code
  std::map<int, std::string> first_input;    // and the input (Symbolize: first address of the batch)
  uint64_t items = 0;                        // addresses symbolized / instances returned
  uint64_t empty = 0;                        // Which: no instance; Symbolize: results without a symbol
  uint64_t no_frames = 0;                    // Symbolize: results without a source frame
  uint64_t mismatched = 0;                   // Resolve --check-canonical: canonical != spec
  uint64_t wrong_count = 0;                  // Symbolize: results.size() != addresses.size()
  std::string first_mismatch;
  Clock::time_point last_end{};
  uint64_t unsent = 0;
  uint64_t warmup_calls = 0;  // --rate: calls due before the end that were never sent (daemon too slow)
};

void Record(ThreadResult& r, const grpc::Status& s, const std::string& input) {
  int c = static_cast<int>(s.error_code());
  if (c >= 0 && c < 17)
    ++r.codes[c];
  else
    ++r.other_codes;
  if (c != 0 && !r.first_message.count(c)) {
    r.first_message[c] = s.error_message();
    r.first_input[c] = input;
  }
}

double Pct(const std::vector<uint64_t>& sorted, double p) {
  if (sorted.empty()) return 0;
  size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(sorted.size())));
  if (rank < 1) rank = 1;
  return sorted[rank - 1] / 1000.0;  // microseconds
}

std::string JsonEscape(const std::string& s) {
  std::string out;
  for (char ch : s) {
    unsigned char c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += ch;
    }
  }
  return out;
}

int RunTimed(const Options& o, const std::vector<std::string>& lines) {
  std::vector<uint64_t> addrs;
  if (o.rpc == "symbolize") addrs = ParseAddresses(lines);
  const size_t n = lines.size();

  std::vector<std::shared_ptr<grpc::Channel>> channels;
  for (int i = 0; i < o.clients; ++i) channels.push_back(MakeChannel(o, i));
  for (int i = 0; i < o.clients; ++i)
    if (!WaitConnected(channels[i], i)) return 1;

  std::vector<ThreadResult> results(o.clients);
  std::barrier start_line(o.clients + 1);
  Clock::time_point t0, measure_from, stop_at;

  auto worker = [&](int id) {
    auto stub = SymbolService::NewStub(channels[id]);
    // grpc.health.v1.Health/Check, called as the generated stubs call theirs (no health stubs here).
    const grpc::internal::RpcMethod health_check("/grpc.health.v1.Health/Check", grpc::internal::RpcMethod::NORMAL_RPC,
                                                 channels[id]);
    ThreadResult& r = results[id];
    r.lat_ns.reserve(1 << 20);
    size_t pos = n * static_cast<size_t>(id) / static_cast<size_t>(o.clients);
    symdex::v1::WhichRequest wreq;
    symdex::v1::ResolveRequest rreq;
    symdex::v1::SymbolizeRequest sreq;
    wreq.set_target(o.target);
    wreq.set_exact(o.exact);
    rreq.set_target(o.target);
    sreq.set_target(o.target);
    start_line.arrive_and_wait();
    bool measuring = false;
    // --rate: this client's calls are due every `interval`, staggered across clients; latency counts
    // from when a call was due, so a server that falls behind is charged for the queueing it causes.
    const Clock::duration interval =
        std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.rate > 0 ? o.clients / o.rate : 0));
    Clock::time_point due = t0 + interval * id / o.clients;
    for (;;) {
      Clock::time_point begin;
      if (o.rate > 0) {
        if (due >= stop_at || Clock::now() >= stop_at) break;  // behind schedule: the rest is unsent
        std::this_thread::sleep_until(due);
        begin = due;
        due += interval;
      } else {
        begin = Clock::now();
        if (begin >= stop_at) break;
      }
      if (!measuring && begin >= measure_from) {  // warm-up over: drop what it counted
        measuring = true;
        r.items = r.empty = r.no_frames = r.mismatched = r.wrong_count = 0;
        r.first_mismatch.clear();
      }
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(o.deadline_ms));
      grpc::Status st;
      const size_t input = pos;
      if (o.rpc == "health") {
        grpc::Slice empty;  // empty bytes = HealthCheckRequest{service: ""}
        grpc::ByteBuffer req(&empty, 1), resp;
        st = grpc::internal::BlockingUnaryCall<grpc::ByteBuffer, grpc::ByteBuffer>(channels[id].get(), health_check,
                                                                                   &ctx, req, &resp);
      } else if (o.rpc == "list-targets") {
        symdex::v1::ListTargetsResponse resp;
        st = stub->ListTargets(&ctx, symdex::v1::ListTargetsRequest(), &resp);
        if (st.ok()) r.items += resp.targets_size();
      } else if (o.rpc == "which") {
        wreq.set_name(lines[pos]);
        symdex::v1::WhichResponse resp;
        st = stub->Which(&ctx, wreq, &resp);
        if (st.ok()) {
          r.items += resp.instances_size();
          if (resp.instances_size() == 0) ++r.empty;
        }
        pos = (pos + 1) % n;
      } else if (o.rpc == "resolve") {
        rreq.set_spec(lines[pos]);
        symdex::v1::ResolveResponse resp;
        st = stub->Resolve(&ctx, rreq, &resp);
        if (st.ok()) {
          ++r.items;
          if (o.check_canonical && resp.match().canonical() != lines[pos]) {
            if (r.mismatched++ == 0) r.first_mismatch = lines[pos] + " -> " + resp.match().canonical();
          }
        }
        pos = (pos + 1) % n;
      } else {
        sreq.clear_addresses();
        for (int k = 0; k < o.batch; ++k) {
          sreq.add_addresses(addrs[pos]);
          pos = (pos + 1) % n;
        }
        symdex::v1::SymbolizeResponse resp;
        st = stub->Symbolize(&ctx, sreq, &resp);
        if (st.ok()) {
          if (resp.results_size() != o.batch) ++r.wrong_count;
          for (const auto& res : resp.results()) {
            ++r.items;
            if (!res.has_symbol()) ++r.empty;
            if (res.frames_size() == 0) ++r.no_frames;
          }
        }
      }
      Clock::time_point end = Clock::now();
      r.last_end = end;
      if (begin < measure_from) {  // warm-up: not counted
        ++r.warmup_calls;
        continue;
      }
      Record(r, st, lines[input]);
      uint64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(end - begin).count();
      r.lat_ns.push_back(ns);
    }
    if (o.rate > 0 && due < stop_at) r.unsent = (stop_at - due + interval - Clock::duration(1)) / interval;
  };

  std::vector<std::thread> threads;
  for (int i = 0; i < o.clients; ++i) threads.emplace_back(worker, i);
  const double cpu0 = CpuSeconds();
  t0 = Clock::now();
  measure_from = t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.warmup));
  stop_at = measure_from + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.seconds));
  start_line.arrive_and_wait();  // publishes t0/measure_from/stop_at to the workers
  for (auto& t : threads) t.join();
  const double client_cpu = CpuSeconds() - cpu0;
  const double wall_all = std::chrono::duration<double>(Clock::now() - t0).count();

  // Merge.
  ThreadResult all;
  Clock::time_point last = measure_from;
  size_t total = 0;
  for (auto& r : results) total += r.lat_ns.size();
  all.lat_ns.reserve(total);
  for (auto& r : results) {
    all.lat_ns.insert(all.lat_ns.end(), r.lat_ns.begin(), r.lat_ns.end());
    for (int c = 0; c < 17; ++c) all.codes[c] += r.codes[c];
    all.other_codes += r.other_codes;
    for (auto& [c, m] : r.first_message) all.first_message.emplace(c, m);
    for (auto& [c, m] : r.first_input) all.first_input.emplace(c, m);
    all.unsent += r.unsent;
    all.warmup_calls += r.warmup_calls;
    all.items += r.items;
    all.empty += r.empty;
    all.no_frames += r.no_frames;
    all.mismatched += r.mismatched;
    all.wrong_count += r.wrong_count;
    if (all.first_mismatch.empty()) all.first_mismatch = r.first_mismatch;
    last = std::max(last, r.last_end);
  }
  std::sort(all.lat_ns.begin(), all.lat_ns.end());
  // Calls started in [measure_from, stop_at); the last ones finish a little later.
  const double elapsed = std::chrono::duration<double>(last - measure_from).count();
  const uint64_t calls = all.lat_ns.size();
  uint64_t answers = 0, failures = 0;
  for (int c = 0; c < 17; ++c) {
    if (IsAnswer(o.rpc, static_cast<grpc::StatusCode>(c)))
      answers += all.codes[c];
    else
      failures += all.codes[c];
  }
  failures += all.other_codes;
  const double qps = elapsed > 0 ? calls / elapsed : 0;
  const double ok_qps = elapsed > 0 ? all.codes[0] / elapsed : 0;
  const double items_ps = elapsed > 0 ? all.items / elapsed : 0;
  const double p50 = Pct(all.lat_ns, 50), p90 = Pct(all.lat_ns, 90), p99 = Pct(all.lat_ns, 99),
               p999 = Pct(all.lat_ns, 99.9), mx = all.lat_ns.empty() ? 0 : all.lat_ns.back() / 1000.0;
  double mean = 0;
  for (uint64_t v : all.lat_ns) mean += v;
  mean = calls ? mean / calls / 1000.0 : 0;

  if (o.json) {
    std::printf(
        "{\"rpc\":\"%s\",\"clients\":%d,\"rate\":%.0f,\"seconds\":%.3f,\"warmup\":%.3f,\"inputs\":%zu,"
        "\"batch\":%d,",
        o.rpc.c_str(), o.clients, o.rate, elapsed, o.warmup, n, o.rpc == "symbolize" ? o.batch : 1);
    std::printf("\"calls\":%" PRIu64 ",\"qps\":%.1f,\"ok_qps\":%.1f,\"items_per_s\":%.1f,", calls, qps, ok_qps,
                items_ps);
    std::printf("\"latency_us\":{\"mean\":%.1f,\"p50\":%.1f,\"p90\":%.1f,\"p99\":%.1f,\"p999\":%.1f,\"max\":%.1f},",
                mean, p50, p90, p99, p999, mx);
    std::printf("\"codes\":{");
    bool first = true;
    for (int c = 0; c < 17; ++c) {
      if (!all.codes[c]) continue;
      std::printf("%s\"%s\":%" PRIu64, first ? "" : ",", CodeName(c), all.codes[c]);
      first = false;
    }
    std::printf("},\"answers\":%" PRIu64 ",\"failures\":%" PRIu64 ",\"items\":%" PRIu64 ",\"empty\":%" PRIu64
                ",\"no_frames\":%" PRIu64 ",\"canonical_mismatch\":%" PRIu64 ",\"wrong_result_count\":%" PRIu64 ",",
                answers, failures, all.items, all.empty, all.no_frames, all.mismatched, all.wrong_count);
    std::printf("\"warmup_calls\":%" PRIu64 ",\"unsent\":%" PRIu64 ",\"client_cpu_s\":%.2f,\"client_wall_s\":%.2f,",
                all.warmup_calls, all.unsent, client_cpu, wall_all);
    std::printf("\"first_errors\":{");
    first = true;
    for (auto& [c, m] : all.first_message) {
      std::printf("%s\"%s\":\"%s\"", first ? "" : ",", CodeName(c), JsonEscape(m.substr(0, 300)).c_str());
      first = false;
    }
    std::printf("},\"first_error_inputs\":{");
    first = true;
    for (auto& [c, m] : all.first_input) {
      std::printf("%s\"%s\":\"%s\"", first ? "" : ",", CodeName(c), JsonEscape(m.substr(0, 300)).c_str());
      first = false;
    }
    std::printf("}}\n");
  }
  {
    FILE* h = o.json ? stderr : stdout;  // with --json the table goes to stderr
    std::fprintf(
        h, "%s: %d clients, %s, %.2f s measured%s, %zu inputs%s\n", o.rpc.c_str(), o.clients,
        o.rate > 0 ? ("open loop at " + std::to_string(static_cast<long>(o.rate)) + " calls/s").c_str() : "closed loop",
        elapsed, o.warmup > 0 ? " (after warm-up)" : "", n,
        o.rpc == "symbolize" ? (", batch " + std::to_string(o.batch)).c_str() : "");
    std::fprintf(h, "  calls %" PRIu64 "  -> %.0f calls/s (%.0f OK/s)", calls, qps, ok_qps);
    if (o.rpc == "symbolize") std::fprintf(h, ", %.0f addresses/s", items_ps);
    std::fprintf(h, "\n  latency us: mean %.1f  p50 %.1f  p90 %.1f  p99 %.1f  p99.9 %.1f  max %.1f\n", mean, p50, p90,
                 p99, p999, mx);
    std::fprintf(h, "  status:");
    for (int c = 0; c < 17; ++c)
      if (all.codes[c]) std::fprintf(h, " %s=%" PRIu64, CodeName(c), all.codes[c]);
    if (all.other_codes) std::fprintf(h, " other=%" PRIu64, all.other_codes);
    std::fprintf(h, "  (answers %" PRIu64 ", failures %" PRIu64 ")\n", answers, failures);
    if (o.rpc == "which")
      std::fprintf(h, "  instances returned %" PRIu64 ", empty answers %" PRIu64 "\n", all.items, all.empty);
    if (o.rpc == "symbolize")
      std::fprintf(h,
                   "  results without a symbol %" PRIu64 ", without a source frame %" PRIu64
                   ", responses with a wrong result count %" PRIu64 "\n",
                   all.empty, all.no_frames, all.wrong_count);
    if (o.check_canonical)
      std::fprintf(h, "  canonical != spec: %" PRIu64 "%s%s\n", all.mismatched,
                   all.first_mismatch.empty() ? "" : " e.g. ", all.first_mismatch.c_str());
    for (auto& [c, m] : all.first_message)
      std::fprintf(h, "  first %s (input '%s'): %s\n", CodeName(c), all.first_input[c].substr(0, 100).c_str(),
                   m.substr(0, 300).c_str());
    if (o.rate > 0)
      std::fprintf(h, "  calls due but not sent before the end (behind schedule): %" PRIu64 "\n", all.unsent);
    std::fprintf(h, "  load generator CPU: %.2f s over %.2f s wall (%.2f cores busy on the client side)\n", client_cpu,
                 wall_all, wall_all > 0 ? client_cpu / wall_all : 0);
  }
  return failures == 0 && all.wrong_count == 0 ? 0 : 1;
}

int RunSymbolizeAll(const Options& o, const std::vector<std::string>& lines) {
  const std::vector<uint64_t> addrs = ParseAddresses(lines);
  auto ch = MakeChannel(o, 0);
  if (!WaitConnected(ch, 0)) return 1;
  auto stub = SymbolService::NewStub(ch);
  int rc = 0;
  if (o.json)
    std::printf("{\"rpc\":\"symbolize-all\",\"addresses\":%zu,\"batch\":%d,\"passes\":[", addrs.size(), o.batch);
  for (int pass = 1; pass <= o.passes; ++pass) {
    uint64_t with_symbol = 0, with_frames = 0, frames = 0, failed_calls = 0, results = 0;
    std::vector<uint64_t> lat;
    std::string first_error;
    symdex::v1::SymbolizeRequest req;
    req.set_target(o.target);
    Clock::time_point t0 = Clock::now();
    if (o.stream) {
      // One SymbolizeStream: a writer thread sends every batch while this thread reads the
      // answers, so the daemon's work on batch N+1 overlaps the client's parsing of batch N.
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(o.deadline_ms));
      auto stream = stub->SymbolizeStream(&ctx);
      std::thread writer([&] {
        symdex::v1::SymbolizeRequest w;
        w.set_target(o.target);
        for (size_t i = 0; i < addrs.size(); i += o.batch) {
          w.clear_addresses();
          for (size_t k = i; k < std::min(addrs.size(), i + o.batch); ++k) w.add_addresses(addrs[k]);
          if (!stream->Write(w)) break;
        }
        stream->WritesDone();
      });
      symdex::v1::SymbolizeResponse resp;
      Clock::time_point b = Clock::now();
      while (stream->Read(&resp)) {
        lat.push_back(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - b).count());
        b = Clock::now();
        results += resp.results_size();
        for (const auto& r : resp.results()) {
          with_symbol += r.has_symbol();
          with_frames += r.frames_size() > 0;
          frames += r.frames_size();
        }
      }
      writer.join();
      grpc::Status st = stream->Finish();
      if (!st.ok()) {
        ++failed_calls;
        first_error = std::string(CodeName(st.error_code())) + ": " + st.error_message();
      }
    }
    for (size_t i = 0; !o.stream && i < addrs.size(); i += o.batch) {
      req.clear_addresses();
      for (size_t k = i; k < std::min(addrs.size(), i + o.batch); ++k) req.add_addresses(addrs[k]);
      grpc::ClientContext ctx;
      Clock::time_point b = Clock::now();
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(o.deadline_ms));
      symdex::v1::SymbolizeResponse resp;
      grpc::Status st = stub->Symbolize(&ctx, req, &resp);
      lat.push_back(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - b).count());
      if (!st.ok()) {
        ++failed_calls;
        if (first_error.empty()) first_error = std::string(CodeName(st.error_code())) + ": " + st.error_message();
        continue;
      }
      results += resp.results_size();
      for (const auto& r : resp.results()) {
        with_symbol += r.has_symbol();
        with_frames += r.frames_size() > 0;
        frames += r.frames_size();
      }
    }
    const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
    std::sort(lat.begin(), lat.end());
    if (failed_calls || results != addrs.size()) rc = 1;
    if (o.json) {
      std::printf("%s{\"pass\":%d,\"wall_s\":%.4f,\"addresses_per_s\":%.0f,\"calls\":%zu,\"failed_calls\":%" PRIu64
                  ",\"results\":%" PRIu64 ",\"with_symbol\":%" PRIu64 ",\"with_frames\":%" PRIu64 ",\"frames\":%" PRIu64
                  ",\"batch_p50_us\":%.1f,\"batch_p99_us\":%.1f,\"batch_max_us\":%.1f,\"first_error\":\"%s\"}",
                  pass > 1 ? "," : "", pass, wall, addrs.size() / wall, lat.size(), failed_calls, results, with_symbol,
                  with_frames, frames, Pct(lat, 50), Pct(lat, 99), lat.empty() ? 0 : lat.back() / 1000.0,
                  JsonEscape(first_error).c_str());
    }
    {
      FILE* h = o.json ? stderr : stdout;
      std::fprintf(h,
                   "symbolize-all pass %d: %zu addresses in %zu calls of <= %d: %.3f s (%.0f addresses/s); "
                   "batch latency p50 %.1f us p99 %.1f us max %.1f us\n",
                   pass, addrs.size(), lat.size(), o.batch, wall, addrs.size() / wall, Pct(lat, 50), Pct(lat, 99),
                   lat.empty() ? 0 : lat.back() / 1000.0);
      std::fprintf(h,
                   "  results %" PRIu64 ", with a symbol %" PRIu64 ", with source frames %" PRIu64 " (%" PRIu64
                   " frames), failed calls %" PRIu64 "%s%s\n",
                   results, with_symbol, with_frames, frames, failed_calls,
                   first_error.empty() ? "" : ", first: ", first_error.c_str());
    }
  }
  if (o.json) std::printf("]}\n");
  return rc;
}

int RunFramesAll(const Options& o, const std::vector<std::string>& lines) {
  const std::vector<uint64_t> addrs = ParseAddresses(lines);
  auto ch = MakeChannel(o, 0);
  if (!WaitConnected(ch, 0)) return 1;
  auto stub = SymbolService::NewStub(ch);
  auto request = [&](size_t i, symdex::v1::SymbolizeFramesRequest& req) {
    req.Clear();
    req.set_target(o.target);
    req.set_kernel_build_id(o.kernel_build_id);
    req.set_kaslr_offset(o.kaslr_offset);
    for (size_t k = i; k < std::min(addrs.size(), i + o.batch); ++k) req.add_frames()->set_address(addrs[k]);
  };
  auto context = [&](grpc::ClientContext& ctx) {
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(o.deadline_ms));
    ctx.AddMetadata("symdex-build-id", o.kernel_build_id);
  };
  int rc = 0;
  if (o.json) std::printf("{\"rpc\":\"frames-all\",\"frames\":%zu,\"batch\":%d,\"passes\":[", addrs.size(), o.batch);
  for (int pass = 1; pass <= o.passes; ++pass) {
    uint64_t results = 0, with_symbol = 0, with_canonical = 0, failed_calls = 0, calls = 0;
    std::string first_error;
    auto count = [&](const symdex::v1::SymbolizeFramesResponse& resp) {
      results += resp.frames_size();
      for (const auto& f : resp.frames()) {
        with_symbol += f.result().has_symbol();
        with_canonical += !f.canonical().empty();
      }
    };
    auto failed = [&](const grpc::Status& st) {
      ++failed_calls;
      if (first_error.empty()) first_error = std::string(CodeName(st.error_code())) + ": " + st.error_message();
    };
    Clock::time_point t0 = Clock::now();
    if (o.stream) {
      grpc::ClientContext ctx;
      context(ctx);
      auto stream = stub->SymbolizeFramesStream(&ctx);
      std::thread writer([&] {
        symdex::v1::SymbolizeFramesRequest w;
        for (size_t i = 0; i < addrs.size(); i += o.batch) {
          request(i, w);
          if (!stream->Write(w)) break;
        }
        stream->WritesDone();
      });
      symdex::v1::SymbolizeFramesResponse resp;
      while (stream->Read(&resp)) {
        ++calls;
        count(resp);
      }
      writer.join();
      if (grpc::Status st = stream->Finish(); !st.ok()) failed(st);
    } else {
      symdex::v1::SymbolizeFramesRequest req;
      for (size_t i = 0; i < addrs.size(); i += o.batch) {
        request(i, req);
        grpc::ClientContext ctx;
        context(ctx);
        symdex::v1::SymbolizeFramesResponse resp;
        ++calls;
        if (grpc::Status st = stub->SymbolizeFrames(&ctx, req, &resp); !st.ok()) {
          failed(st);
          continue;
        }
        count(resp);
      }
    }
    const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
    if (failed_calls || results != addrs.size()) rc = 1;
    if (o.json) {
      std::printf("%s{\"pass\":%d,\"wall_s\":%.4f,\"frames_per_s\":%.0f,\"calls\":%" PRIu64 ",\"failed_calls\":%" PRIu64
                  ",\"results\":%" PRIu64 ",\"with_symbol\":%" PRIu64 ",\"with_canonical\":%" PRIu64
                  ",\"first_error\":\"%s\"}",
                  pass > 1 ? "," : "", pass, wall, addrs.size() / wall, calls, failed_calls, results, with_symbol,
                  with_canonical, JsonEscape(first_error).c_str());
    }
    std::fprintf(o.json ? stderr : stdout,
                 "frames-all pass %d: %zu frames in %" PRIu64
                 " calls of <= %d: %.3f s (%.0f frames/s); with a symbol "
                 "%" PRIu64 ", with a canonical spec %" PRIu64 ", failed calls %" PRIu64 "%s%s\n",
                 pass, addrs.size(), calls, o.batch, wall, addrs.size() / wall, with_symbol, with_canonical,
                 failed_calls, first_error.empty() ? "" : ", first: ", first_error.c_str());
  }
  if (o.json) std::printf("]}\n");
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  Options o = Parse(argc, argv);
  std::vector<std::string> lines = o.inputs.empty() ? std::vector<std::string>{""} : ReadLines(o.inputs);
  std::fflush(stdout);
  if (o.rpc == "frames-all") return RunFramesAll(o, lines);
  return o.rpc == "symbolize-all" ? RunSymbolizeAll(o, lines) : RunTimed(o, lines);
}
