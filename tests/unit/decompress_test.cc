#include "server/ingest/decompress.h"

#include <gtest/gtest.h>
#include <lzma.h>
#include <zlib.h>
#include <zstd.h>

namespace symdex::ingest {
namespace {

std::string Payload() {
  std::string s;
  for (int i = 0; i < 20000; ++i) s += "kernel module payload " + std::to_string(i) + "\n";
  return s;
}

std::string XzCompress(const std::string& in) {
  std::string out(in.size() + 4096, '\0');
  size_t pos = 0;
  EXPECT_EQ(lzma_easy_buffer_encode(6, LZMA_CHECK_CRC64, nullptr, reinterpret_cast<const uint8_t*>(in.data()),
                                    in.size(), reinterpret_cast<uint8_t*>(out.data()), &pos, out.size()),
            LZMA_OK);
  out.resize(pos);
  return out;
}

std::string ZstdCompress(const std::string& in) {
  std::string out(ZSTD_compressBound(in.size()), '\0');
  size_t n = ZSTD_compress(out.data(), out.size(), in.data(), in.size(), 3);
  EXPECT_FALSE(ZSTD_isError(n));
  out.resize(n);
  return out;
}

std::string GzipCompress(const std::string& in) {
  z_stream s{};
  EXPECT_EQ(deflateInit2(&s, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&s, in.size()) + 64, '\0');
  s.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  s.avail_in = static_cast<uInt>(in.size());
  s.next_out = reinterpret_cast<Bytef*>(out.data());
  s.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&s, Z_FINISH), Z_STREAM_END);
  out.resize(s.total_out);
  deflateEnd(&s);
  return out;
}

struct Case {
  Compression kind;
  std::string (*compress)(const std::string&);
};

class DecompressTest : public ::testing::TestWithParam<Case> {};

TEST_P(DecompressTest, RoundTripDetectAndLimits) {
  const std::string plain = Payload();
  const std::string packed = GetParam().compress(plain);
  EXPECT_EQ(DetectCompression(packed), GetParam().kind);
  auto out = Decompress(packed, GetParam().kind, plain.size());
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, plain);
  // One byte less than needed: refused, not truncated silently.
  auto limited = Decompress(packed, GetParam().kind, plain.size() - 1);
  EXPECT_EQ(limited.status().code(), absl::StatusCode::kResourceExhausted);
  // Truncated input: an error, not a short result.
  auto truncated = Decompress(packed.substr(0, packed.size() / 2), GetParam().kind, plain.size());
  EXPECT_FALSE(truncated.ok());
  // Corrupted body.
  std::string bad = packed;
  for (size_t i = bad.size() / 3; i < bad.size() / 3 + 64 && i < bad.size(); ++i) bad[i] ^= 0x5a;
  auto corrupt = Decompress(bad, GetParam().kind, plain.size());
  EXPECT_FALSE(corrupt.ok() && *corrupt == plain);
}

INSTANTIATE_TEST_SUITE_P(Formats, DecompressTest,
                         ::testing::Values(Case{Compression::kXz, XzCompress}, Case{Compression::kZstd, ZstdCompress},
                                           Case{Compression::kGzip, GzipCompress}));

// xz output is allocated once from the size its index records (a module's one stream); what the
// index does not tell — several streams, stream padding, a ratio past belief — is grown as read.
TEST(DecompressTest, XzSizedFromItsIndexOrGrownAsRead) {
  const std::string a = Payload(), b = Payload() + "and a second stream";
  auto one = Decompress(XzCompress(a), Compression::kXz, a.size());
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(*one, a);
  // Two streams: the last one's index gives only its own size.
  auto two = Decompress(XzCompress(a) + XzCompress(b), Compression::kXz, a.size() + b.size());
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_EQ(*two, a + b);
  EXPECT_EQ(Decompress(XzCompress(a) + XzCompress(b), Compression::kXz, a.size() + b.size() - 1).status().code(),
            absl::StatusCode::kResourceExhausted);
  // Stream padding after the footer (four zero bytes): no footer at the end.
  auto padded = Decompress(XzCompress(a) + std::string(4, '\0'), Compression::kXz, a.size());
  ASSERT_TRUE(padded.ok()) << padded.status();
  EXPECT_EQ(*padded, a);
  // 4 MiB of zeros compress far past the ratio the index is believed up to.
  const std::string zeros(size_t{4} << 20, '\0');
  auto z = Decompress(XzCompress(zeros), Compression::kXz, zeros.size());
  ASSERT_TRUE(z.ok()) << z.status();
  EXPECT_TRUE(*z == zeros);
  // Into one buffer, file after file: each result whole and alone, the buffer's memory kept.
  std::string buf;
  ASSERT_TRUE(DecompressInto(XzCompress(zeros), Compression::kXz, zeros.size(), buf).ok());
  const size_t kept = buf.capacity();
  ASSERT_TRUE(DecompressInto(XzCompress(a), Compression::kXz, a.size(), buf).ok());
  EXPECT_EQ(buf, a);
  EXPECT_EQ(buf.capacity(), kept);
  ASSERT_TRUE(DecompressInto(GzipCompress(b), Compression::kGzip, b.size(), buf).ok());
  EXPECT_EQ(buf, b);
  ASSERT_TRUE(DecompressInto(b, Compression::kNone, b.size(), buf).ok());
  EXPECT_EQ(buf, b);
}

// A bare zlib stream (what an ELF section compressed as ELFCOMPRESS_ZLIB holds): never detected
// by magic bytes, decompressed when named, bounded and checked as the others.
TEST(DecompressTest, BareZlibStream) {
  const std::string plain = Payload();
  uLongf n = compressBound(static_cast<uLong>(plain.size()));
  std::string packed(n, '\0');
  ASSERT_EQ(compress2(reinterpret_cast<Bytef*>(packed.data()), &n, reinterpret_cast<const Bytef*>(plain.data()),
                      static_cast<uLong>(plain.size()), 6),
            Z_OK);
  packed.resize(n);
  EXPECT_EQ(DetectCompression(packed), Compression::kNone);
  auto out = Decompress(packed, Compression::kZlib, plain.size());
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, plain);
  EXPECT_EQ(Decompress(packed, Compression::kZlib, plain.size() - 1).status().code(),
            absl::StatusCode::kResourceExhausted);
  auto truncated = Decompress(packed.substr(0, packed.size() / 2), Compression::kZlib, plain.size());
  ASSERT_FALSE(truncated.ok());
  EXPECT_NE(std::string(truncated.status().message()).find("truncated zlib data"), std::string::npos);
}

TEST(DecompressTest, PlainElfIsNotCompressed) {
  EXPECT_EQ(DetectCompression("\x7f"
                              "ELF\x02\x01\x01"),
            Compression::kNone);
  EXPECT_EQ(DetectCompression(""), Compression::kNone);
}

}  // namespace
}  // namespace symdex::ingest
