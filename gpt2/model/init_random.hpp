// The random numbers of GPT-2's initialisation, the same bits on every platform.
//
// std::normal_distribution (and the uniform ones) are implementation-defined: libstdc++, libc++
// and MSVC give different numbers for the same engine. Osprey's initialisation is part of its
// output (a run without a checkpoint prints text computed from it), so it is spelled out here:
//
//   SplitMix64 (Steele, Lea, Flood 2014)  seeds each stream from (seed, stream number);
//   xoshiro256** (Blackman, Vigna 2018)   draws 64-bit words;
//   53-bit uniforms                        u = (word >> 11) · 2^-53 in [0, 1);
//   Marsaglia's polar method               two standard normals per accepted pair, using only
//                                          log and sqrt from osprey::math (no sin/cos).
//
// Every operation is integer arithmetic or a single IEEE double operation, so the sequence is a
// function of the seed alone.
#pragma once

#include <cstdint>

#include "osprey/config.hpp"

namespace gpt2 {

// SplitMix64: one 64-bit word per call; used to expand a seed into xoshiro's state.
class SplitMix64 {
 public:
  explicit SplitMix64(std::uint64_t state) : m_state(state) {}
  std::uint64_t next() {
    std::uint64_t z = (m_state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }

 private:
  std::uint64_t m_state;
};

// Standard normal deviates from xoshiro256**, one independent stream per (seed, stream).
class NormalStream {
 public:
  NormalStream(std::uint64_t seed, std::uint64_t stream);

  // A uniform double in [0, 1) with 53 random bits.
  double uniform();
  // A standard normal deviate (mean 0, variance 1).
  double normal();

 private:
  std::uint64_t nextWord();

  std::uint64_t m_s[4];
  double m_spare = 0.0;  // the second deviate of the last accepted polar pair
  bool m_hasSpare = false;
};

}  // namespace gpt2
