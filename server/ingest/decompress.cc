#include "server/ingest/decompress.h"

#include <lzma.h>
#include <zlib.h>
#include <zstd.h>

#include <memory>
#include <optional>

#include "server/common/strings.h"

namespace symdex::ingest {
namespace {

absl::Status TooLarge(size_t max_out) {
  return absl::ResourceExhaustedError(StrCat("decompressed data exceeds the limit of ", max_out, " bytes"));
}

// The uncompressed size the index of `in`'s last xz stream records, when `in` ends with a
// well-formed stream footer and index: the size of a one-stream file (a compressed kernel
// module), known before decoding, so the output is allocated once instead of grown by doubling
// (each step a copy and fresh pages to fault in). A hint only: believed up to kMaxXzRatio times
// the input, and the decoder still checks every byte against the limit.
constexpr uint64_t kMaxXzRatio = 32;
std::optional<uint64_t> XzSizeHint(std::string_view in) {
  if (in.size() < 2 * LZMA_STREAM_HEADER_SIZE) return std::nullopt;
  const auto* end = reinterpret_cast<const uint8_t*>(in.data()) + in.size();
  lzma_stream_flags footer;
  if (lzma_stream_footer_decode(&footer, end - LZMA_STREAM_HEADER_SIZE) != LZMA_OK) return std::nullopt;
  if (footer.backward_size > in.size() - 2 * LZMA_STREAM_HEADER_SIZE) return std::nullopt;
  lzma_index* index = nullptr;
  uint64_t memlimit = uint64_t{1} << 20;
  size_t pos = 0;
  if (lzma_index_buffer_decode(&index, &memlimit, nullptr, end - LZMA_STREAM_HEADER_SIZE - footer.backward_size, &pos,
                               static_cast<size_t>(footer.backward_size)) != LZMA_OK) {
    return std::nullopt;
  }
  const uint64_t size = lzma_index_uncompressed_size(index);
  lzma_index_end(index, nullptr);
  if (size == 0 || size / kMaxXzRatio > in.size()) return std::nullopt;
  return size;
}

absl::Status Xz(std::string_view in, size_t max_out, std::string& out) {
  lzma_stream strm = LZMA_STREAM_INIT;
  if (lzma_stream_decoder(&strm, UINT64_MAX, LZMA_CONCATENATED) != LZMA_OK) {
    return absl::InternalError("cannot initialise the xz decoder");
  }
  std::unique_ptr<lzma_stream, void (*)(lzma_stream*)> guard(&strm, lzma_end);
  out.clear();
  strm.next_in = reinterpret_cast<const uint8_t*>(in.data());
  strm.avail_in = in.size();
  // The first step: the whole output when its size is known (one byte more, so that a stream
  // that ends there is seen to end without another step).
  std::optional<uint64_t> hint = XzSizeHint(in);
  for (;;) {
    size_t old = out.size();
    size_t grow = std::max<size_t>(1 << 16, old);
    if (hint) grow = static_cast<size_t>(std::min<uint64_t>(*hint + 1, max_out + 1));
    hint.reset();
    if (old >= max_out + 1) return TooLarge(max_out);
    grow = std::min(grow, max_out + 1 - old);
    out.resize(old + grow);
    strm.next_out = reinterpret_cast<uint8_t*>(out.data() + old);
    strm.avail_out = grow;
    lzma_ret r = lzma_code(&strm, LZMA_FINISH);
    out.resize(old + grow - strm.avail_out);
    if (r == LZMA_STREAM_END) break;
    if (r != LZMA_OK) return absl::InvalidArgumentError(StrCat("corrupt xz data (lzma error ", r, ")"));
    if (strm.avail_out != 0 && strm.avail_in == 0) {
      return absl::InvalidArgumentError("truncated xz data");
    }
  }
  if (out.size() > max_out) return TooLarge(max_out);
  return absl::OkStatus();
}

}  // namespace

Compression DetectCompression(std::string_view d) {
  if (d.starts_with(std::string_view("\xFD"
                                     "7zXZ\0",
                                     6)))
    return Compression::kXz;
  if (d.starts_with("\x28\xB5\x2F\xFD")) return Compression::kZstd;
  if (d.starts_with("\x1F\x8B")) return Compression::kGzip;
  return Compression::kNone;
}

absl::StatusOr<std::string> Decompress(std::string_view data, Compression kind, size_t max_out) {
  std::string out;
  RETURN_IF_ERROR(DecompressInto(data, kind, max_out, out));
  return out;
}

absl::Status DecompressInto(std::string_view data, Compression kind, size_t max_out, std::string& out) {
  out.clear();
  switch (kind) {
    case Compression::kNone:
      if (data.size() > max_out) return TooLarge(max_out);
      out.assign(data);
      return absl::OkStatus();
    case Compression::kXz:
      return Xz(data, max_out, out);
    case Compression::kZstd:
    case Compression::kGzip:
    case Compression::kZlib:  // the stream, collected
      return DecompressStream(data, kind, max_out, [&](std::string_view piece) {
        out.append(piece);
        return absl::OkStatus();
      });
  }
  return absl::InternalError("unknown compression");
}

absl::Status DecompressStream(std::string_view data, Compression kind, size_t max_out,
                              const std::function<absl::Status(std::string_view)>& sink) {
  constexpr size_t kPiece = size_t{1} << 20;
  std::unique_ptr<char[]> buf(new char[kPiece]);
  size_t total = 0;
  auto emit = [&](size_t n) -> absl::Status {
    total += n;
    if (total > max_out) return TooLarge(max_out);
    return n == 0 ? absl::OkStatus() : sink(std::string_view(buf.get(), n));
  };
  if (kind == Compression::kZstd) {
    std::unique_ptr<ZSTD_DCtx, size_t (*)(ZSTD_DCtx*)> ctx(ZSTD_createDCtx(), ZSTD_freeDCtx);
    if (!ctx) return absl::InternalError("cannot initialise the zstd decoder");
    ZSTD_inBuffer ib{data.data(), data.size(), 0};
    size_t last = 1;
    while (ib.pos < ib.size || last != 0) {
      ZSTD_outBuffer ob{buf.get(), kPiece, 0};
      last = ZSTD_decompressStream(ctx.get(), &ob, &ib);
      if (ZSTD_isError(last)) return absl::InvalidArgumentError(StrCat("corrupt zstd data: ", ZSTD_getErrorName(last)));
      RETURN_IF_ERROR(emit(ob.pos));
      if (ib.pos == ib.size && ob.pos < kPiece && last != 0) return absl::InvalidArgumentError("truncated zstd data");
    }
    return absl::OkStatus();
  }
  if (kind != Compression::kZlib && kind != Compression::kGzip) {
    return absl::UnimplementedError("only zstd, gzip and zlib data are decompressed as a stream");
  }
  z_stream strm{};
  if (inflateInit2(&strm, kind == Compression::kGzip ? 16 + MAX_WBITS : MAX_WBITS) != Z_OK) {
    return absl::InternalError("cannot initialise zlib");
  }
  std::unique_ptr<z_stream, int (*)(z_stream*)> guard(&strm, inflateEnd);
  const char* const what = kind == Compression::kGzip ? "gzip" : "zlib";
  size_t fed = 0;
  for (;;) {
    if (strm.avail_in == 0 && fed < data.size()) {  // zlib counts in 32 bits: feed at most 1 GiB
      const size_t n = std::min(data.size() - fed, size_t{1} << 30);
      strm.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data() + fed));
      strm.avail_in = static_cast<uInt>(n);
      fed += n;
    }
    strm.next_out = reinterpret_cast<Bytef*>(buf.get());
    strm.avail_out = static_cast<uInt>(kPiece);
    const int r = inflate(&strm, Z_NO_FLUSH);
    if (r != Z_OK && r != Z_STREAM_END && r != Z_BUF_ERROR) {
      return absl::InvalidArgumentError(StrCat("corrupt ", what, " data"));
    }
    const size_t made = kPiece - strm.avail_out;
    RETURN_IF_ERROR(emit(made));
    if (r == Z_STREAM_END) return absl::OkStatus();
    if (made == 0 && strm.avail_in == 0 && fed == data.size()) {
      return absl::InvalidArgumentError(StrCat("truncated ", what, " data"));
    }
  }
}

absl::StatusOr<std::string> GzipCompress(std::string_view in) {
  z_stream strm{};
  if (deflateInit2(&strm, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    return absl::InternalError("cannot initialise zlib");
  }
  std::unique_ptr<z_stream, int (*)(z_stream*)> guard(&strm, deflateEnd);
  std::string out(deflateBound(&strm, static_cast<uLong>(in.size())), '\0');
  strm.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  strm.avail_in = static_cast<uInt>(in.size());
  strm.next_out = reinterpret_cast<Bytef*>(out.data());
  strm.avail_out = static_cast<uInt>(out.size());
  if (in.size() > UINT32_MAX || deflate(&strm, Z_FINISH) != Z_STREAM_END) {
    return absl::InternalError("gzip compression failed");
  }
  out.resize(strm.total_out);
  return out;
}

}  // namespace symdex::ingest
