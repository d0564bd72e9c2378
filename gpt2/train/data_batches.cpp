// Train/validation split and sequential batches (see data_batches.hpp).
#include "gpt2/train/data_batches.hpp"

#include <fmt/format.h>

namespace gpt2::data {

TokenSplit splitTrainVal(const std::vector<TokenId>& tokens) {
  // 90/10 in integer arithmetic, so the split point is the same on every machine.
  const std::size_t cut = tokens.size() / 10 * 9 + (tokens.size() % 10) * 9 / 10;
  TokenSplit split;
  split.train.assign(tokens.begin(), tokens.begin() + static_cast<std::ptrdiff_t>(cut));
  split.val.assign(tokens.begin() + static_cast<std::ptrdiff_t>(cut), tokens.end());
  return split;
}

Batch batchRows(const Batch& batch, Index first, Index count) {
  Batch out;
  out.B = count;
  out.T = batch.T;
  const auto begin = static_cast<std::ptrdiff_t>(first * batch.T);
  const auto end = static_cast<std::ptrdiff_t>((first + count) * batch.T);
  out.inputs.assign(batch.inputs.begin() + begin, batch.inputs.begin() + end);
  out.targets.assign(batch.targets.begin() + begin, batch.targets.begin() + end);
  return out;
}

osprey::Result<void> checkFitsOneBatch(Index available, Index B, Index T, const std::string& what,
                                       const std::string& source) {
  if (B < 1 || T < 1)
    return osprey::Error{fmt::format("--batch and --seq must be at least 1 (got {} and {})", B, T)};
  Index need = 0;
  if (__builtin_mul_overflow(B, T, &need) || __builtin_add_overflow(need, Index{1}, &need))
    return osprey::Error{fmt::format("--batch {} x --seq {} is too large", B, T)};
  if (available < need)
    return osprey::Error{fmt::format(
        "{}: the {} split has {} tokens, fewer than one batch needs (batch {} x seq {} + 1 = {}); "
        "use a longer text or a smaller --batch/--seq",
        source, what, available, B, T, need)};
  return {};
}

osprey::Result<BatchStream> BatchStream::create(std::span<const TokenId> tokens, Index B, Index T,
                                                const std::string& what, const std::string& source) {
  OSPREY_CHECK(checkFitsOneBatch(static_cast<Index>(tokens.size()), B, T, what, source));
  return BatchStream(tokens, B, T);
}

bool BatchStream::fitsAt(Index position) const {
  return position >= 0 && position + m_B * m_T + 1 <= static_cast<Index>(m_tokens.size());
}

Batch BatchStream::next() {
  if (!fitsAt(m_position)) {
    m_position = 0;
    ++m_epoch;
  }
  Batch batch;
  batch.B = m_B;
  batch.T = m_T;
  const Index n = m_B * m_T;
  const auto* start = m_tokens.data() + m_position;
  batch.inputs.assign(start, start + n);
  batch.targets.assign(start + 1, start + n + 1);
  m_position += n;
  return batch;
}

osprey::Result<void> BatchStream::seek(Index position, Index epoch) {
  // A saved position may sit just past the last batch that fits (it wraps on the next call).
  if (position < 0 || position > static_cast<Index>(m_tokens.size()) || epoch < 0)
    return osprey::Error{fmt::format("data position {} (epoch {}) does not fit a split of {} tokens",
                                     position, epoch, m_tokens.size())};
  m_position = position;
  m_epoch = epoch;
  return {};
}

}  // namespace gpt2::data
