// QueryApi over gRPC: the CLI as a client of symdexd. Answers come back as the same structs
// LocalQuery returns (server/api/convert.h), so the CLI prints identical output.
#pragma once

#include <memory>
#include <string>

#include "server/query/api.h"

namespace symdex::api {

// gRPC metadata naming the kernel a request is for (lower-case hex vmlinux build-ID): what a
// proxy in front of fleet replicas hashes on (deploy/proxy/), so each kernel has one replica.
inline constexpr std::string_view kBuildIdHeader = "symdex-build-id";
// Trailing metadata symdexd sets on every call it handles: a status carrying it is the daemon's
// answer (UNAVAILABLE: debuginfod unreachable), one without it is gRPC's (the daemon unreachable).
inline constexpr const char* kAnsweredHeader = "symdex-answered";

struct ConnectOptions {
  // "unix:/run/symdex/symdex.sock", "unix:relative.sock", or "HOST:PORT" (TCP).
  std::string address;
  // TCP only: TLS with this CA bundle (PEM); without it the channel is plaintext (a daemon
  // refuses plaintext TCP unless started with --insecure-tcp).
  std::string tls_ca;
  std::string tls_cert, tls_key;  // client certificate, for daemons that verify clients
  std::string tls_server_name;    // override the name checked against the server certificate
  double deadline_seconds = 60;
  // A call for a kernel by build-ID may wait for a fleet replica to fetch and index it first
  // (a distro kernel: a minute or more): such calls get at least this long.
  double fleet_deadline_seconds = 900;
};

class RemoteQuery : public query::QueryApi {
 public:
  // Does not connect yet; the first call does (and fails with UNAVAILABLE naming the address).
  static absl::StatusOr<std::unique_ptr<RemoteQuery>> Connect(const ConnectOptions& opts);
  ~RemoteQuery() override;

  // Waits up to `seconds` for the channel to be ready.
  bool WaitReady(double seconds);

  // A verb of query/verbs.h: its request on the wire by field name (wire_fields.h), its answer
  // read back.
  absl::StatusOr<query::AnyAnswer> Call(const query::AnyRequest& r) override;

 private:
  struct Impl;
  explicit RemoteQuery(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace symdex::api
