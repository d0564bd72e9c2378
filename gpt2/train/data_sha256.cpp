// SHA-256 through OpenSSL's EVP interface (libcrypto): the content key of the token cache.
#include "gpt2/train/data_sha256.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <vector>

#include <fmt/format.h>
#include <openssl/evp.h>

namespace gpt2::data {
namespace {

using DigestContext = std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)>;

std::string hex(const unsigned char* digest, unsigned length) {
  std::string out;
  out.reserve(2 * length);
  for (unsigned i = 0; i < length; ++i) out += fmt::format("{:02x}", digest[i]);
  return out;
}

}  // namespace

std::string sha256Hex(std::string_view bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned length = 0;
  // EVP_Digest only fails on allocation failure inside OpenSSL; an empty string then marks the
  // key as unknown, which makes the cache miss rather than match.
  if (!EVP_Digest(bytes.data(), bytes.size(), digest, &length, EVP_sha256(), nullptr)) return {};
  return hex(digest, length);
}

osprey::Result<std::string> sha256File(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return osprey::Error{fmt::format("{}: cannot open for reading", path)};
  DigestContext ctx(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
  if (!ctx || !EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr))
    return osprey::Error{fmt::format("{}: cannot start a SHA-256 digest (OpenSSL)", path)};
  // Blocks of 1 MiB, or one block the file's size when it is smaller (a zeroed MiB for each small
  // shard is most of the time a fuzzer spends on it).
  std::error_code ec;
  const std::uintmax_t size = std::filesystem::file_size(path, ec);
  const std::uintmax_t blockSize = ec ? std::uintmax_t{1} << 20 : std::min<std::uintmax_t>(size + 1, 1u << 20);
  std::vector<char> block(static_cast<std::size_t>(blockSize));
  while (in) {
    in.read(block.data(), static_cast<std::streamsize>(block.size()));
    if (in.gcount() > 0 && !EVP_DigestUpdate(ctx.get(), block.data(), static_cast<std::size_t>(in.gcount())))
      return osprey::Error{fmt::format("{}: SHA-256 update failed (OpenSSL)", path)};
  }
  if (in.bad()) return osprey::Error{fmt::format("{}: read error while hashing", path)};
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned length = 0;
  if (!EVP_DigestFinal_ex(ctx.get(), digest, &length))
    return osprey::Error{fmt::format("{}: SHA-256 finish failed (OpenSSL)", path)};
  return hex(digest, length);
}

}  // namespace gpt2::data
