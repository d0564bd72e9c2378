// One checked way to parse the JSON a run reads: a safetensors header, config.json, vocab.json,
// trainer_state.json and the token cache's header all go through parseJson, so no file is read
// by weaker rules than another. It never throws, and every refusal names the file and where:
//
//   * not JSON at all, or cut short: "not valid JSON", with nlohmann's reason and position;
//   * a number beyond double's range (1e400): the key that holds it, "a number is out of range";
//   * a key given twice in one object, at any depth: the key and the object holding it. (nlohmann
//     and Python's json keep the last silently, other readers the first: the same file would mean
//     different things to different programs.) Keys are compared after unescaping, so "a" and
//     "\u0061" are the same key. Text that does not parse says so before any repeated key;
//   * nesting deeper than `maxDepth`: refused before parsing (a real file nests a few levels; a
//     hostile one of a million brackets would only cost memory and time).
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "osprey/result.hpp"

namespace osprey::io {

struct JsonRules {
  // What the text is, when it is part of a file: "header" gives "<file>: header is not valid
  // JSON: ..."; empty gives "<file>: not valid JSON: ...".
  std::string_view part;
  int maxDepth = 64;
};

// The parsed document, or an error "<file>: ..." (see the file comment).
Result<nlohmann::json> parseJson(std::string_view text, const std::string& file, const JsonRules& rules = {});

}  // namespace osprey::io
