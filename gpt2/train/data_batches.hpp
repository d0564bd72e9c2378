// Train/validation split and sequential batch streaming over a token sequence.
//
// Dimension legend: B = sequences per batch, T = tokens per sequence.
//
// A batch is B*T + 1 consecutive tokens starting at the stream's position: row b's inputs are
// tokens[pos + b*T, pos + (b+1)*T) and its targets the same range shifted by one. After a batch
// the position advances by B*T; when fewer than B*T + 1 tokens remain it wraps to 0 (the tail is
// skipped, as llm.c's loader does). The position is all the state a stream has, so a checkpoint
// that stores it resumes on exactly the next batch.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "gpt2/train/data_cache.hpp"
#include "osprey/config.hpp"
#include "osprey/result.hpp"

namespace gpt2::data {

using osprey::Index;

// The first 90% of the tokens train, the last 10% validate.
struct TokenSplit {
  std::vector<TokenId> train;
  std::vector<TokenId> val;
};
TokenSplit splitTrainVal(const std::vector<TokenId>& tokens);

// One batch: B rows of T input tokens and their T next-token targets.
struct Batch {
  Index B = 0;
  Index T = 0;
  std::vector<TokenId> inputs;   // (B, T)
  std::vector<TokenId> targets;  // (B, T)
};

// Rows [first, first + count) of a batch: one micro-batch.
Batch batchRows(const Batch& batch, Index first, Index count);

// A clear error when `available` tokens cannot fill one batch of B x T (`what` names the split
// and `source` the file), nothing otherwise.
osprey::Result<void> checkFitsOneBatch(Index available, Index B, Index T, const std::string& what,
                                       const std::string& source);

// Sequential batches over a token sequence (not owned: the tokens must outlive the stream).
class BatchStream {
 public:
  // Fails when tokens cannot fill one batch (see checkFitsOneBatch).
  static osprey::Result<BatchStream> create(std::span<const TokenId> tokens, Index B, Index T,
                                            const std::string& what, const std::string& source);

  // The batch at the current position; then the position advances (wrapping).
  Batch next();

  // Where the next batch starts, and how many times the stream has wrapped.
  Index position() const { return m_position; }
  Index epoch() const { return m_epoch; }
  // Restores a position saved from a stream over the same tokens; an error if it cannot be one.
  osprey::Result<void> seek(Index position, Index epoch);

 private:
  BatchStream(std::span<const TokenId> tokens, Index B, Index T)
      : m_tokens(tokens), m_B(B), m_T(T) {}
  bool fitsAt(Index position) const;

  std::span<const TokenId> m_tokens;
  Index m_B = 0, m_T = 0;
  Index m_position = 0;
  Index m_epoch = 0;
};

}  // namespace gpt2::data
