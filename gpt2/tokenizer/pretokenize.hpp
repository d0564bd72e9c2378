// GPT-2's pre-tokenisation: cutting text into the pieces ("words") that BPE then works on
// one at a time, with the pattern OpenAI's encoder uses:
//
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//
// matched by PCRE2 in UTF + UCP mode (JIT-compiled where PCRE2 has a JIT).
//
// Two choices keep this exact and total:
// * `\s` is written \p{White_Space}. OpenAI's encoder runs the pattern with Python's `regex`
//   module, whose \s is exactly the Unicode White_Space property; PCRE2's own \s in UCP mode also
//   takes U+180E (Mongolian vowel separator), which would cut words differently around it.
// * GPT-2 is byte-level, so every byte string must be encodable, including invalid UTF-8.
//   PCRE2_MATCH_INVALID_UTF lets the pattern run over such text: no match ever covers an
//   invalid byte, so matches stop at them, and each maximal run of bytes between matches (they
//   are all invalid UTF-8: every valid character is matched by some branch) becomes a piece of
//   its own. The pieces always cover the text exactly, in order.
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "osprey/result.hpp"

namespace gpt2 {

class Pretokenizer {
 public:
  // Compiles the pattern; fails only if the PCRE2 build lacks Unicode support.
  static osprey::Result<Pretokenizer> create();

  // The pieces of `text`, as views into it, in order; concatenated they are `text`.
  // Fails only on a PCRE2 run-time error (e.g. a resource limit), never on the input's bytes.
  osprey::Result<std::vector<std::string_view>> split(std::string_view text) const;

  // Whether the pattern runs JIT-compiled (it is only a matter of speed).
  bool jit() const;

 private:
  struct Compiled;
  explicit Pretokenizer(std::shared_ptr<const Compiled> compiled) : m_compiled(std::move(compiled)) {}
  std::shared_ptr<const Compiled> m_compiled;
};

}  // namespace gpt2
