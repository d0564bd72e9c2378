// GPT-2's byte alphabet (see tokenizer_bytes.hpp).
#include "gpt2/tokenizer/bytes.hpp"

namespace gpt2::bytes {

namespace {

// Bytes that GPT-2 lets spell themselves: the printable, non-space Latin-1 characters.
bool standsForItself(unsigned b) {
  return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

std::array<char32_t, 256> buildByteToCodePoint() {
  std::array<char32_t, 256> table{};
  char32_t next = 256;  // the others take 256, 257, ... in byte order
  for (unsigned b = 0; b < 256; ++b) table[b] = standsForItself(b) ? char32_t(b) : next++;
  return table;
}

// Code points 0..323 cover the whole alphabet (256 + 68 - 1 is the largest one).
constexpr char32_t kLargestCodePoint = 256 + 68 - 1;

std::array<int, kLargestCodePoint + 1> buildCodePointToByte() {
  std::array<int, kLargestCodePoint + 1> table{};
  table.fill(-1);
  const auto& forward = byteToCodePoint();
  for (unsigned b = 0; b < 256; ++b) table[forward[b]] = int(b);
  return table;
}

}  // namespace

const std::array<char32_t, 256>& byteToCodePoint() {
  static const std::array<char32_t, 256> table = buildByteToCodePoint();
  return table;
}

std::optional<std::uint8_t> codePointToByte(char32_t cp) {
  static const std::array<int, kLargestCodePoint + 1> table = buildCodePointToByte();
  if (cp > kLargestCodePoint || table[cp] < 0) return std::nullopt;
  return static_cast<std::uint8_t>(table[cp]);
}

std::string utf8Encode(char32_t cp) {
  std::string out;
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += char(0xE0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xF0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3F));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
  return out;
}

std::optional<std::string> spellingToBytes(std::string_view spelling) {
  // Alphabet characters are all below U+0800, so only 1- and 2-byte UTF-8 sequences can occur.
  std::string out;
  out.reserve(spelling.size());
  for (std::size_t i = 0; i < spelling.size();) {
    const auto lead = static_cast<unsigned char>(spelling[i]);
    char32_t cp = 0;
    if (lead < 0x80) {
      cp = lead;
      i += 1;
    } else if ((lead & 0xE0) == 0xC0 && lead >= 0xC2 && i + 1 < spelling.size() &&
               (static_cast<unsigned char>(spelling[i + 1]) & 0xC0) == 0x80) {
      cp = (char32_t(lead & 0x1F) << 6) | char32_t(static_cast<unsigned char>(spelling[i + 1]) & 0x3F);
      i += 2;
    } else {
      return std::nullopt;
    }
    const auto byte = codePointToByte(cp);
    if (!byte) return std::nullopt;
    out += char(*byte);
  }
  return out;
}

}  // namespace gpt2::bytes
