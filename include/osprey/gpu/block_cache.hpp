// The bookkeeping of a device's memory cache: which blocks are handed out, which released blocks
// wait to be handed out again (by exact byte size), and what the cache and the live buffers hold.
//
// Both devices keep released blocks instead of giving them back, because a model asks for the same
// few sizes over and over: on the host a fresh block costs a page fault per page on first touch,
// on a GPU cudaMalloc and cudaFree cost tens of microseconds and cudaFree waits for the whole
// device. The devices allocate and free the memory itself; this class only decides. It takes its
// own lock, so a device may call it from any thread.
#pragma once

#include <cstddef>
#include <map>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

namespace osprey {

class BlockCache {
 public:
  // At most `limit` bytes wait in the cache; a block released beyond that goes back at once.
  explicit BlockCache(std::size_t limit = static_cast<std::size_t>(-1)) : m_limit(limit) {}

  // A released block of exactly `bytes`, now live again, if the cache holds one.
  std::optional<void*> take(std::size_t bytes) {
    std::lock_guard lock(m_lock);
    auto cached = m_idle.find(bytes);
    if (cached == m_idle.end() || cached->second.empty()) return std::nullopt;
    void* p = cached->second.back();
    cached->second.pop_back();
    m_cachedBytes -= bytes;
    noteLive(p, bytes);
    return p;
  }
  // A fresh block the device allocated, now live.
  void add(void* p, std::size_t bytes) {
    std::lock_guard lock(m_lock);
    noteLive(p, bytes);
  }

  // What became of a released block.
  enum class Released {
    Cached,   // waits in the cache
    Held,     // stays live until the hold ends (see hold)
    GiveBack, // the cache is full: the device frees it now
    Unknown,  // not a block of this cache: left alone
  };
  // A released block: cached, held or to be given back (its size is returned with it).
  std::pair<Released, std::size_t> release(const void* p) {
    std::lock_guard lock(m_lock);
    auto live = m_live.find(p);
    if (live == m_live.end()) return {Released::Unknown, 0};
    const std::size_t bytes = live->second;
    if (m_holding) {
      m_held.push_back(p);
      return {Released::Held, bytes};
    }
    m_liveBytes -= bytes;
    m_live.erase(live);
    if (m_cachedBytes + bytes > m_limit) return {Released::GiveBack, bytes};
    m_idle[bytes].push_back(const_cast<void*>(p));
    m_cachedBytes += bytes;
    return {Released::Cached, bytes};
  }

  // While held, released blocks stay live instead of going back to the cache (a CUDA graph replays
  // its recording's kernels onto the very blocks they used). Ending the hold returns the blocks
  // released meanwhile, for the device to release again.
  std::vector<const void*> hold(bool on) {
    std::lock_guard lock(m_lock);
    m_holding = on;
    std::vector<const void*> held;
    if (!on) held.swap(m_held);
    return held;
  }

  // Every cached block with its size, emptied out of the cache for the device to free.
  std::map<std::size_t, std::vector<void*>> drain() {
    std::lock_guard lock(m_lock);
    std::map<std::size_t, std::vector<void*>> idle;
    idle.swap(m_idle);
    m_cachedBytes = 0;
    return idle;
  }

  std::size_t cachedBytes() const {
    std::lock_guard lock(m_lock);
    return m_cachedBytes;
  }
  // The most bytes handed out at once since the cache was made (or since resetPeak()).
  std::size_t peakLiveBytes() const {
    std::lock_guard lock(m_lock);
    return m_peakLiveBytes;
  }
  void resetPeak() {
    std::lock_guard lock(m_lock);
    m_peakLiveBytes = m_liveBytes;
  }
  void setLimit(std::size_t limit) {
    std::lock_guard lock(m_lock);
    m_limit = limit;
  }

 private:
  // m_lock held.
  void noteLive(void* p, std::size_t bytes) {
    m_live[p] = bytes;
    m_liveBytes += bytes;
    if (m_liveBytes > m_peakLiveBytes) m_peakLiveBytes = m_liveBytes;
  }

  mutable std::mutex m_lock;
  std::size_t m_limit;
  std::map<const void*, std::size_t> m_live;         // handed out: pointer -> bytes
  std::map<std::size_t, std::vector<void*>> m_idle;  // released: bytes -> blocks
  std::size_t m_cachedBytes = 0;
  std::size_t m_liveBytes = 0, m_peakLiveBytes = 0;
  bool m_holding = false;
  std::vector<const void*> m_held;
};

}  // namespace osprey
