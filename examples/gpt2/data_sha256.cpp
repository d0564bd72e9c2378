// SHA-256 (FIPS 180-4): message schedule of 64 words, 64 rounds per 512-bit block.
#include "gpt2/data_sha256.hpp"

#include <array>
#include <cstdint>
#include <fstream>
#include <vector>

#include <fmt/format.h>

namespace gpt2::data {
namespace {

constexpr std::array<std::uint32_t, 64> kRound = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

std::uint32_t rotr(std::uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

// Running state: eight hash words, a partial block and the total length in bytes.
class Sha256 {
 public:
  void update(const unsigned char* p, std::size_t n) {
    m_length += n;
    while (n > 0) {
      std::size_t take = std::min(n, 64 - m_fill);
      for (std::size_t i = 0; i < take; ++i) m_block[m_fill + i] = p[i];
      m_fill += take;
      p += take;
      n -= take;
      if (m_fill == 64) {
        compress();
        m_fill = 0;
      }
    }
  }

  std::string hex() {
    // Padding: 0x80, zeros to 56 mod 64, then the message length in bits, big-endian.
    const std::uint64_t bits = m_length * 8;
    const unsigned char one = 0x80, zero = 0;
    update(&one, 1);
    while (m_fill != 56) update(&zero, 1);
    for (int i = 7; i >= 0; --i) {
      unsigned char b = static_cast<unsigned char>(bits >> (8 * i));
      update(&b, 1);
    }
    std::string out;
    for (std::uint32_t h : m_hash) out += fmt::format("{:08x}", h);
    return out;
  }

 private:
  void compress() {
    std::uint32_t w[64];
    for (int i = 0; i < 16; ++i)
      w[i] = (std::uint32_t(m_block[4 * i]) << 24) | (std::uint32_t(m_block[4 * i + 1]) << 16) |
             (std::uint32_t(m_block[4 * i + 2]) << 8) | std::uint32_t(m_block[4 * i + 3]);
    for (int i = 16; i < 64; ++i) {
      std::uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
      std::uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
      w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    std::uint32_t a = m_hash[0], b = m_hash[1], c = m_hash[2], d = m_hash[3];
    std::uint32_t e = m_hash[4], f = m_hash[5], g = m_hash[6], h = m_hash[7];
    for (int i = 0; i < 64; ++i) {
      std::uint32_t s1 = rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25);
      std::uint32_t ch = (e & f) ^ (~e & g);
      std::uint32_t t1 = h + s1 + ch + kRound[i] + w[i];
      std::uint32_t s0 = rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22);
      std::uint32_t maj = (a & b) ^ (a & c) ^ (b & c);
      std::uint32_t t2 = s0 + maj;
      h = g;
      g = f;
      f = e;
      e = d + t1;
      d = c;
      c = b;
      b = a;
      a = t1 + t2;
    }
    m_hash[0] += a;
    m_hash[1] += b;
    m_hash[2] += c;
    m_hash[3] += d;
    m_hash[4] += e;
    m_hash[5] += f;
    m_hash[6] += g;
    m_hash[7] += h;
  }

  std::array<std::uint32_t, 8> m_hash = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                         0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  unsigned char m_block[64] = {};
  std::size_t m_fill = 0;
  std::uint64_t m_length = 0;
};

}  // namespace

std::string sha256Hex(std::string_view bytes) {
  Sha256 s;
  s.update(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size());
  return s.hex();
}

osprey::Result<std::string> sha256File(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return osprey::Error{fmt::format("{}: cannot open for reading", path)};
  Sha256 s;
  std::vector<char> chunk(1 << 16);
  while (in) {
    in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    s.update(reinterpret_cast<const unsigned char*>(chunk.data()), static_cast<std::size_t>(in.gcount()));
  }
  if (in.bad()) return osprey::Error{fmt::format("{}: read error", path)};
  return s.hex();
}

}  // namespace gpt2::data
