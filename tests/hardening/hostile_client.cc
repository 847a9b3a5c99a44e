// A hostile symdexd client, for tests/hardening and tests/bench (soak.sh, hostile_latency.sh):
// what a local user who wants to wedge or bloat the daemon would do. Each mode opens its calls,
// holds them without reading a byte, then reads one answer of each (a refused call ends with its
// status; an accepted one answers, and is cancelled) and prints one JSON line counting the
// outcomes.
//
//   hostile_client --connect unix:S abandon-dups N          N ListDuplicates streams, never read
//   hostile_client --connect unix:S unread-streams N ADDRS  N SymbolizeStreams, each sending one
//                                                           request of ADDRS addresses (--base HEX,
//                                                           the next 4 KiB over and over), never read
//   hostile_client --connect unix:S garbage N               N connections that send random bytes
//
// How long the calls are held: --hold S seconds (default 5), or with --release FILE until FILE
// exists (for at most an hour). --ready FILE: FILE is created once every call is open (garbage:
// sent), so that a test measures while the calls are held, not after a guessed delay.
//
// Calls are spread over connections of at most 100 streams each (a connection allows 128).
#include <grpcpp/grpcpp.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "symdex/v1/symdex.grpc.pb.h"

namespace pb = symdex::v1;

namespace {

std::string g_ready, g_release;  // --ready, --release
double g_hold = 5;               // --hold

// Says every call is open (--ready), then holds them: until --release exists, or --hold seconds.
void Hold() {
  if (!g_ready.empty()) {
    if (FILE* f = std::fopen(g_ready.c_str(), "w")) std::fclose(f);
  }
  if (g_release.empty()) {
    std::this_thread::sleep_for(std::chrono::duration<double>(g_hold));
    return;
  }
  const auto end = std::chrono::steady_clock::now() + std::chrono::hours(1);
  while (::access(g_release.c_str(), F_OK) != 0 && std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

std::vector<std::shared_ptr<grpc::Channel>> Channels(const std::string& target, int calls) {
  std::vector<std::shared_ptr<grpc::Channel>> out;
  for (int i = 0; i < (calls + 99) / 100; ++i) {
    grpc::ChannelArguments args;
    args.SetInt("symdex.hostile.conn", i);  // distinct args: a connection of its own
    args.SetMaxReceiveMessageSize(-1);
    out.push_back(grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args));
  }
  return out;
}

std::string CodeName(grpc::StatusCode c) {
  static const char* kNames[] = {
      "OK",        "CANCELLED",      "UNKNOWN",           "INVALID_ARGUMENT",   "DEADLINE_EXCEEDED",
      "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
      "ABORTED",   "OUT_OF_RANGE",   "UNIMPLEMENTED",     "INTERNAL",           "UNAVAILABLE",
      "DATA_LOSS", "UNAUTHENTICATED"};
  int i = static_cast<int>(c);
  return i >= 0 && i <= 16 ? kNames[i] : "?";
}

void Print(const char* mode, int calls, const std::map<std::string, int>& codes) {
  std::string j = std::string("{\"mode\":\"") + mode + "\",\"calls\":" + std::to_string(calls) + ",\"codes\":{";
  bool first = true;
  for (const auto& [k, v] : codes) {
    j += (first ? "\"" : ",\"") + k + "\":" + std::to_string(v);
    first = false;
  }
  std::printf("%s}}\n", j.c_str());
}

int AbandonDups(const std::string& target, int n) {
  auto channels = Channels(target, n);
  struct Call {
    grpc::ClientContext ctx;
    std::unique_ptr<grpc::ClientReader<pb::DuplicateGroup>> reader;
  };
  std::vector<std::unique_ptr<Call>> calls;
  for (int i = 0; i < n; ++i) {
    auto c = std::make_unique<Call>();
    auto stub = pb::SymbolService::NewStub(channels[i / 100]);
    c->reader = stub->ListDuplicates(&c->ctx, pb::ListDuplicatesRequest());
    calls.push_back(std::move(c));
  }
  Hold();
  std::map<std::string, int> codes;
  // Now read: a refused call has its status waiting; an accepted one its first answer.
  for (auto& c : calls) {
    pb::DuplicateGroup g;
    if (c->reader->Read(&g)) {
      c->ctx.TryCancel();
      while (c->reader->Read(&g)) {
      }
      c->reader->Finish();
      ++codes["served"];
      continue;
    }
    ++codes[CodeName(c->reader->Finish().error_code())];
  }
  Print("abandon-dups", n, codes);
  return 0;
}

uint64_t g_base = 0xffffffff81000000ull;

int UnreadStreams(const std::string& target, int n, int addrs) {
  auto channels = Channels(target, n);
  struct Call {
    grpc::ClientContext ctx;
    std::unique_ptr<grpc::ClientReaderWriter<pb::SymbolizeRequest, pb::SymbolizeResponse>> stream;
  };
  pb::SymbolizeRequest req;
  for (int i = 0; i < addrs; ++i) req.add_addresses(g_base + static_cast<uint64_t>(i) % 4096);
  std::vector<std::unique_ptr<Call>> calls;
  for (int i = 0; i < n; ++i) {
    auto c = std::make_unique<Call>();
    auto stub = pb::SymbolService::NewStub(channels[i / 100]);
    c->stream = stub->SymbolizeStream(&c->ctx);
    c->stream->Write(req);
    calls.push_back(std::move(c));
  }
  Hold();
  std::map<std::string, int> codes;
  for (auto& c : calls) {
    pb::SymbolizeResponse r;
    if (c->stream->Read(&r)) {
      c->ctx.TryCancel();
      while (c->stream->Read(&r)) {
      }
      c->stream->Finish();
      ++codes["served"];
      continue;
    }
    ++codes[CodeName(c->stream->Finish().error_code())];
  }
  Print("unread-streams", n, codes);
  return 0;
}

int Garbage(const std::string& target, int n) {
  if (!target.starts_with("unix:")) return 2;
  std::string path = target.substr(5);
  std::mt19937_64 rng(42);
  std::map<std::string, int> codes;
  for (int i = 0; i < n; ++i) {
    int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, path.c_str(), sizeof(a.sun_path) - 1);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
      ++codes["connect-failed"];
      ::close(fd);
      continue;
    }
    std::string bytes(4096, '\0');
    for (auto& b : bytes) b = static_cast<char>(rng());
    if (i % 2 == 0) bytes = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes;  // a valid preface, then junk
    ssize_t w = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    ++codes[w > 0 ? "sent" : "send-failed"];
    ::close(fd);
  }
  if (!g_ready.empty()) {
    if (FILE* f = std::fopen(g_ready.c_str(), "w")) std::fclose(f);
  }
  Print("garbage", n, codes);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string target;
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--connect" && i + 1 < argc)
      target = argv[++i];
    else if (a == "--hold" && i + 1 < argc)
      g_hold = std::stod(argv[++i]);
    else if (a == "--ready" && i + 1 < argc)
      g_ready = argv[++i];
    else if (a == "--release" && i + 1 < argc)
      g_release = argv[++i];
    else if (a == "--base" && i + 1 < argc)
      g_base = std::stoull(argv[++i], nullptr, 16);
    else
      args.push_back(a);
  }
  if (target.empty() || args.empty()) {
    std::fprintf(stderr,
                 "usage: hostile_client --connect ADDR [--hold S | --release FILE] [--ready FILE] abandon-dups N | "
                 "unread-streams N ADDRS | garbage N\n");
    return 2;
  }
  if (args[0] == "abandon-dups" && args.size() == 2) return AbandonDups(target, std::stoi(args[1]));
  if (args[0] == "unread-streams" && args.size() == 3) {
    return UnreadStreams(target, std::stoi(args[1]), std::stoi(args[2]));
  }
  if (args[0] == "garbage" && args.size() == 2) return Garbage(target, std::stoi(args[1]));
  std::fprintf(stderr, "hostile_client: unknown mode\n");
  return 2;
}
