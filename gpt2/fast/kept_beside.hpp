// Values kept beside the float buffers they were made from, for as long as each buffer's memory
// lives: the bf16 twins (fast/bf16_twins.hpp) and the column sums (fast/column_sums.hpp). The
// effect never writes a buffer it has handed out, so a value made from a buffer stays that
// buffer's. A value is found by its buffer and a key (a twin's length, the sums' row width); a
// buffer is the one a value was made from only if it is the same elements of the same memory
// block (a later block at a released one's address is another buffer). nvcc units only.
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "osprey/gpu/cuda/fast.hpp"

namespace gpt2::fast_parts {

template <class Value>
class KeptBeside {
 public:
  using Buffer = osprey::Fast::Buffer;

  // The value kept for b under `key`, else null.
  const Value* find(const Buffer& b, osprey::Index key) const {
    for (const Entry& e : m_entries)
      if (e.key == key && e.isFor(b)) return &e.value;
    return nullptr;
  }
  // Releases the values whose buffers are gone. Apart from add, so that a caller releases them
  // before it allocates the next value (whose memory may then be one of theirs).
  void forgetDead() {
    std::erase_if(m_entries, [](const Entry& e) { return e.source.expired(); });
  }
  void add(const Buffer& b, osprey::Index key, Value value) {
    m_entries.push_back(Entry{b.memory(), b.address(), b.size(), key, std::move(value)});
  }

 private:
  struct Entry {
    std::weak_ptr<float> source;
    const float* data;
    osprey::Index n, key;
    Value value;
    bool isFor(const Buffer& b) const {
      const std::shared_ptr<float>& memory = b.memory();
      return data == b.address() && n == b.size() && !source.owner_before(memory) && !memory.owner_before(source);
    }
  };
  std::vector<Entry> m_entries;
};

}  // namespace gpt2::fast_parts
