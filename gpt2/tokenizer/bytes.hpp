// GPT-2's byte alphabet: the reversible map from the 256 byte values to 256 printable Unicode
// characters that the vocabulary spells its tokens in (OpenAI's bytes_to_unicode), and the
// small UTF-8 helpers needed to read token spellings.
//
// Bytes that are printable Latin-1 characters ('!'..'~', '¡'..'¬', '®'..'ÿ') stand for
// themselves; the other 68 bytes (controls, space, soft hyphen, ...) are given the code points
// 256, 257, ... in byte order. So a space is 'Ġ' (U+0120) and a newline 'Ċ' (U+010A).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace gpt2::bytes {

// Byte value -> the code point that spells it in the vocabulary.
const std::array<char32_t, 256>& byteToCodePoint();

// Code point -> the byte it spells, or nothing when it is not one of the 256 alphabet characters.
std::optional<std::uint8_t> codePointToByte(char32_t cp);

// The UTF-8 encoding of one code point (cp < 0x110000).
std::string utf8Encode(char32_t cp);

// Decodes a token's spelling (UTF-8 made only of alphabet characters) back to the bytes it
// stands for; nothing when the spelling is not valid UTF-8 or uses a character outside the
// alphabet.
std::optional<std::string> spellingToBytes(std::string_view spelling);

}  // namespace gpt2::bytes
