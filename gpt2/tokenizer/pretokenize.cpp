// GPT-2's pre-tokenisation with PCRE2 (see tokenizer_pretokenize.hpp for the pattern and why
// \s is spelled \p{White_Space}).
#include "gpt2/tokenizer/pretokenize.hpp"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <string>

namespace gpt2 {

namespace {

constexpr const char* kPattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\p{White_Space}\p{L}\p{N}]+)"
    R"(|\p{White_Space}+(?!\P{White_Space})|\p{White_Space}+)";

std::string pcre2Message(int code) {
  PCRE2_UCHAR buffer[256];
  if (pcre2_get_error_message(code, buffer, sizeof buffer) < 0) return "PCRE2 error " + std::to_string(code);
  return reinterpret_cast<const char*>(buffer);
}

}  // namespace

struct Pretokenizer::Compiled {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Compiled() { pcre2_code_free(code); }
};

osprey::Result<Pretokenizer> Pretokenizer::create() {
  int errorCode = 0;
  PCRE2_SIZE errorOffset = 0;
  auto compiled = std::make_shared<Compiled>();
  compiled->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(kPattern), PCRE2_ZERO_TERMINATED,
                                 PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &errorCode,
                                 &errorOffset, nullptr);
  if (compiled->code == nullptr) {
    return osprey::Error{"GPT-2 pre-tokenisation pattern does not compile with this PCRE2 (needs "
                         "Unicode support, 10.34 or later): " + pcre2Message(errorCode)};
  }
  // Without a JIT (or if it fails) the interpreter gives the same matches, only slower.
  compiled->jit = pcre2_jit_compile(compiled->code, PCRE2_JIT_COMPLETE) == 0;
  return Pretokenizer(std::move(compiled));
}

bool Pretokenizer::jit() const { return m_compiled->jit; }

osprey::Result<std::vector<std::string_view>> Pretokenizer::split(std::string_view text) const {
  std::vector<std::string_view> pieces;
  std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> match(
      pcre2_match_data_create_from_pattern(m_compiled->code, nullptr), &pcre2_match_data_free);
  if (!match) return osprey::Error{"out of memory preparing the pre-tokenisation match"};
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());

  std::size_t at = 0;
  while (at < text.size()) {
    const int rc = pcre2_match(m_compiled->code, subject, text.size(), at, 0, match.get(), nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) {
      pieces.push_back(text.substr(at));  // trailing invalid bytes
      break;
    }
    if (rc < 0) return osprey::Error{"pre-tokenisation failed: " + pcre2Message(rc)};
    const PCRE2_SIZE* span = pcre2_get_ovector_pointer(match.get());
    const std::size_t start = span[0];
    const std::size_t end = span[1];
    // Every branch consumes at least one character, so an empty match cannot happen; guard
    // anyway, since looping on one would never end.
    if (start < at || end <= start || end > text.size()) {
      return osprey::Error{"pre-tokenisation failed: the pattern matched an empty or misplaced span"};
    }
    if (start > at) pieces.push_back(text.substr(at, start - at));  // invalid bytes between
    pieces.push_back(text.substr(start, end - start));
    at = end;
  }
  return pieces;
}

}  // namespace gpt2
