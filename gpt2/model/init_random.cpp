// xoshiro256** and Marsaglia's polar method, written out so the bits never depend on a library.
#include "gpt2/model/init_random.hpp"

#include "osprey/math.hpp"

namespace gpt2 {
namespace {

std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

// The stream number is itself passed through SplitMix64 so that neighbouring streams (tensor 7
// and tensor 8) start from unrelated states.
std::uint64_t streamKey(std::uint64_t seed, std::uint64_t stream) {
  SplitMix64 mix(stream);
  return seed ^ mix.next();
}

}  // namespace

NormalStream::NormalStream(std::uint64_t seed, std::uint64_t stream) {
  SplitMix64 expand(streamKey(seed, stream));
  for (auto& word : m_s) word = expand.next();
  // xoshiro's only forbidden state is all zeros; SplitMix64 cannot produce four zero words in a
  // row, but the guard costs nothing and documents the requirement.
  if ((m_s[0] | m_s[1] | m_s[2] | m_s[3]) == 0) m_s[0] = 1;
}

std::uint64_t NormalStream::nextWord() {
  const std::uint64_t result = rotl(m_s[1] * 5, 7) * 9;
  const std::uint64_t t = m_s[1] << 17;
  m_s[2] ^= m_s[0];
  m_s[3] ^= m_s[1];
  m_s[1] ^= m_s[2];
  m_s[0] ^= m_s[3];
  m_s[2] ^= t;
  m_s[3] = rotl(m_s[3], 45);
  return result;
}

double NormalStream::uniform() {
  constexpr double kTwoToMinus53 = 1.0 / 9007199254740992.0;
  return static_cast<double>(nextWord() >> 11) * kTwoToMinus53;
}

double NormalStream::normal() {
  if (m_hasSpare) {
    m_hasSpare = false;
    return m_spare;
  }
  // Draw (u, v) uniform in the square (-1, 1)², keep it if it lies strictly inside the unit
  // circle (and off the origin): then u·f and v·f with f = sqrt(-2 ln s / s) are independent
  // standard normals.
  for (;;) {
    const double u = 2.0 * uniform() - 1.0;
    const double v = 2.0 * uniform() - 1.0;
    const double s = u * u + v * v;
    if (s >= 1.0 || s == 0.0) continue;
    const double f = osprey::math::sqrt(-2.0 * osprey::math::log(s) / s);
    m_spare = v * f;
    m_hasSpare = true;
    return u * f;
  }
}

}  // namespace gpt2
