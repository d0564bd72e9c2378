// SHA-256 of bytes and of files (OpenSSL libcrypto): the content key of the tokenised-data cache.
//
// The cache must notice any change to the text or to the tokenizer files, not only a change of
// size or modification time; a content hash does.
#pragma once

#include <string>
#include <string_view>

#include "osprey/result.hpp"

namespace gpt2::data {

// Lower-case hex digest, e.g. sha256Hex("abc") == "ba7816bf…15ad".
std::string sha256Hex(std::string_view bytes);

// The digest of a whole file, streamed; an error names the file when it cannot be read.
osprey::Result<std::string> sha256File(const std::string& path);

}  // namespace gpt2::data
