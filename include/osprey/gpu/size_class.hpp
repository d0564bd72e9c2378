// The block sizes the device caching allocators (host.hpp, cuda.hpp) hand out: a request is
// rounded up to one of eight sizes per power of two (at most 12.5% more), so a buffer that grows
// a little at a time (decoding's key/value cache gains one row per token) keeps landing in the
// same size and reuses the block released a step earlier, instead of asking the system for a new
// block of a size never to be seen again.
#pragma once

#include <bit>
#include <cstddef>

namespace osprey {

constexpr std::size_t sizeClass(std::size_t bytes) {
  if (bytes <= 4096) return (bytes + 255) / 256 * 256;
  const std::size_t step = std::bit_floor(bytes) / 8;
  return (bytes + step - 1) / step * step;
}

static_assert(sizeClass(1) == 256 && sizeClass(4096) == 4096);
static_assert(sizeClass(6144) == 6144 && sizeClass(6145) == 6656);
static_assert(sizeClass(1u << 20) == 1u << 20 && sizeClass((1u << 20) + 1) == (1u << 20) + (1u << 17));

}  // namespace osprey
