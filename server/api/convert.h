// query structs <-> symdex.v1 messages, and absl::Status <-> grpc::Status. Both directions live
// here so the daemon (structs -> wire) and the CLI as a client (wire -> structs) cannot drift:
// a test round-trips every field.
#pragma once

#include <grpcpp/support/status.h>

#include <span>

#include "server/common/status.h"
#include "server/query/api.h"
#include "symdex/v1/symdex.pb.h"

namespace symdex::api {

namespace pb = ::symdex::v1;

void ToProto(const query::Instance& in, pb::Instance* out);
query::Instance FromProto(const pb::Instance& in);
// From a message converted once (an answer): its strings are moved out, not copied.
query::Instance FromProto(pb::Instance&& in);

void ToProto(const query::TargetSummary& t, pb::Target* out);
query::TargetSummary FromProto(const pb::Target& t);

void ToProto(const query::CanonicalMatch& m, pb::Match* out);
query::CanonicalMatch FromProto(const pb::Match& m);

void ToProto(uint64_t addr, const query::AddressInfo& a, pb::AddressResult* out);
query::AddressInfo FromProto(const pb::AddressResult& a);
query::AddressInfo FromProto(pb::AddressResult&& a);
void ToProto(const query::SymbolizeRequest& r, pb::SymbolizeRequest* out);
query::SymbolizeRequest FromProto(const pb::SymbolizeRequest& r);
void ToProto(const query::SymbolizeResult& r, pb::SymbolizeResponse* out);
query::SymbolizeResult FromProto(const pb::SymbolizeResponse& r);
query::SymbolizeResult FromProto(pb::SymbolizeResponse&& r);  // its strings moved out

void ToProto(const query::AddrMapState& a, pb::AddrMap* out);
query::AddrMapState FromProto(const pb::AddrMap& a);

void ToProto(const query::JitFunction& l, pb::JitLoad* out);
query::JitFunction FromProto(const pb::JitLoad& l);
void ToProto(const query::JitAddrResult& r, pb::JitAddrResult* out);
query::JitAddrResult FromProto(const pb::JitAddrResult& r);
void ToProto(const query::BuildIdAnswer& a, pb::LookupBuildIdResponse* out);
query::BuildIdAnswer FromProto(const pb::LookupBuildIdResponse& a);

// `first`: the index of frames[0] in the whole batch (a part of one): callers are renumbered
// from it, and each must lie inside `frames`.
void ToProto(const std::string& target, const query::FramesContext& ctx, std::span<const query::FrameIn> frames,
             pb::SymbolizeFramesRequest* out, uint32_t first = 0);
// `frames` may be null: the target, kernel base and modules only.
void FromProto(const pb::SymbolizeFramesRequest& req, std::string* target, query::FramesContext* ctx,
               std::vector<query::FrameIn>* frames);
void ToProto(const query::FramesRequest& r, pb::SymbolizeFramesRequest* out);
query::FramesRequest FromProto(const pb::SymbolizeFramesRequest& req);
void ToProto(const query::FramesResult& r, pb::SymbolizeFramesResponse* out);
query::FramesResult FromProto(const pb::SymbolizeFramesResponse& r);
query::FramesResult FromProto(pb::SymbolizeFramesResponse&& r);
void ToProto(const query::FrameAnswer& a, pb::FrameResult* out);
query::FrameAnswer FromProto(const pb::FrameResult& p);
query::DecodeRequest FromProto(const pb::DecodeRequest& req);
void ToProto(const query::DecodeResult& r, pb::DecodeResponse* out);
query::PprofRequest FromProto(const pb::SymbolizePprofRequest& req);
void ToProto(const query::PprofResult& r, pb::SymbolizePprofResponse* out);

// absl codes map 1:1 onto gRPC codes (same numbering); the message is kept.
grpc::Status ToGrpc(const absl::Status& s);
absl::Status FromGrpc(const grpc::Status& s);

// Resolve's not-found / ambiguous answers as gRPC errors (NOT_FOUND / ABORTED) carrying a
// symdex.v1.Ambiguity in google.rpc.Status details, and back: a status without those details
// is returned as an error instead.
// The details carry every candidate up to kMaxStatusDetailsBytes (then the first ones that fit,
// and the message says how many were left out). Clients must accept trailing metadata that big:
// grpc.max_metadata_size (C++: GRPC_ARG_MAX_METADATA_SIZE; Python: options=[("grpc.max_metadata_size", 1 << 20)]).
inline constexpr size_t kMaxStatusDetailsBytes = 512 << 10;
grpc::Status ResolveError(const std::string& spec, const query::ResolveResult& r);
absl::StatusOr<query::ResolveResult> ResolveFromError(const grpc::Status& s);

}  // namespace symdex::api
