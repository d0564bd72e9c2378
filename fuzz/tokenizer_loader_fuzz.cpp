// libFuzzer target: arbitrary bytes as the GPT-2 tokenizer's two files.
//
// The input is split at its first NUL byte: before it is vocab.json, after it merges.txt (a
// NUL-free input is all vocab.json with no merges). Loading must never crash; a tokenizer that
// loads must give back exactly the bytes it encoded, for a piece of the input itself as text.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "gpt2/tokenizer/tokenizer.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const std::size_t split = input.find('\0');
  const std::string_view vocab = input.substr(0, split);
  const std::string_view merges = split == std::string_view::npos ? std::string_view() : input.substr(split + 1);

  auto tokenizer = gpt2::Tokenizer::fromContents(vocab, merges);
  if (!tokenizer.ok()) {
    if (tokenizer.error().message.empty()) std::abort();  // refusals must say why
    return 0;
  }
  const std::string_view text = input.substr(0, std::min<std::size_t>(size, 256));
  auto ids = tokenizer->encode(text);
  if (!ids.ok()) return 0;  // a regex resource limit, allowed by the interface
  auto back = tokenizer->decode(*ids);
  if (!back.ok() || *back != text) std::abort();
  return 0;
}
