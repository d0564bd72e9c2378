// parseJson (see json_text.hpp): nlohmann's parser with a callback that follows where it is
// (the open objects and arrays, the last key of each) and remembers every key of every open
// object, so a repeated key is found at any depth and named with the object holding it.
#include "osprey/io/json_text.hpp"

#include <exception>
#include <optional>
#include <unordered_set>
#include <vector>

#include <fmt/format.h>

namespace osprey::io {
namespace {

using Json = nlohmann::json;

// Whether `json` nests at most `limit` levels of arrays and objects (brackets inside strings do
// not count). A linear scan, so a hostile depth costs nothing before it is refused.
bool nestingWithin(std::string_view json, int limit) {
  int depth = 0;
  bool inString = false;
  bool escaped = false;
  for (char c : json) {
    if (inString) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        inString = false;
      }
    } else if (c == '"') {
      inString = true;
    } else if (c == '[' || c == '{') {
      if (++depth > limit) return false;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return true;
}

// nlohmann's messages start with "[json.exception.parse_error.101] "; the rest is the useful part.
std::string withoutJsonPrefix(const char* what) {
  std::string text = what;
  if (!text.empty() && text.front() == '[') {
    const std::size_t close = text.find("] ");
    if (close != std::string::npos) text.erase(0, close + 2);
  }
  return text;
}

// A key as a message shows it: JSON escapes for control characters, cut after 80 bytes (at a
// character boundary).
std::string shownKey(const std::string& key) {
  std::string text = Json(key).dump(-1, ' ', false, Json::error_handler_t::replace);
  if (text.size() >= 2) text = std::string(text, 1, text.size() - 2);  // without the quotes
  if (text.size() <= 80) return text;
  std::size_t cut = 80;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return text.substr(0, cut) + "...";
}

// Where the parser is: one frame per open object or array.
class Position {
 public:
  bool onEvent(Json::parse_event_t event, Json& parsed) {
    switch (event) {
      case Json::parse_event_t::object_start: m_frames.emplace_back(true); break;
      case Json::parse_event_t::array_start: m_frames.emplace_back(false); break;
      case Json::parse_event_t::key: onKey(parsed.get_ref<const std::string&>()); break;
      case Json::parse_event_t::value: elementDone(); break;
      case Json::parse_event_t::object_end:
      case Json::parse_event_t::array_end:
        m_frames.pop_back();
        elementDone();
        break;
    }
    return true;  // keep everything: the first repeated key is reported once the whole text parsed
  }

  // "adamw.lr", "w.shape[0]": the key or element being read ("" at the top level).
  std::string path(std::size_t frames) const {
    std::string out;
    for (std::size_t i = 0; i < frames && i < m_frames.size(); ++i) {
      const Frame& f = m_frames[i];
      if (!f.object) {
        out += fmt::format("[{}]", f.index);
      } else {
        if (!out.empty()) out += '.';
        out += shownKey(f.key);
      }
    }
    return out;
  }
  std::string path() const { return path(m_frames.size()); }

  // "key `x` is given twice (in `y`)", for the first key repeated in its object.
  const std::optional<std::string>& repeated() const { return m_repeated; }

 private:
  struct Frame {
    explicit Frame(bool isObject) : object(isObject) {}
    bool object = false;
    std::string key;                       // objects: the last key read
    std::size_t index = 0;                 // arrays: elements read so far
    std::unordered_set<std::string> keys;  // objects: every key read
  };

  void onKey(const std::string& key) {
    Frame& f = m_frames.back();
    f.key = key;
    if (f.keys.insert(key).second || m_repeated) return;
    const std::string holder = path(m_frames.size() - 1);
    m_repeated = fmt::format("key `{}` is given twice{}: a JSON object's keys must differ (readers disagree on "
                             "which one counts)",
                             shownKey(key), holder.empty() ? std::string() : fmt::format(" in `{}`", holder));
  }

  void elementDone() {
    if (!m_frames.empty() && !m_frames.back().object) ++m_frames.back().index;
  }

  std::vector<Frame> m_frames;
  std::optional<std::string> m_repeated;
};

}  // namespace

Result<Json> parseJson(std::string_view text, const std::string& file, const JsonRules& rules) {
  // "<file>: header JSON nests...", "<file>: header is not valid JSON: ...", "<file>: header: key ...".
  const std::string part(rules.part);
  const std::string lead = part.empty() ? std::string() : part + " ";
  const std::string label = part.empty() ? file + ": " : file + ": " + part + ": ";
  if (!nestingWithin(text, rules.maxDepth))
    return Error{fmt::format("{}: {}JSON nests deeper than {} levels", file, lead, rules.maxDepth)};
  Position at;
  Json root;
  try {
    root = Json::parse(text.begin(), text.end(),
                       [&at](int, Json::parse_event_t event, Json& parsed) { return at.onEvent(event, parsed); });
  } catch (const Json::out_of_range& e) {  // a number beyond double's range, such as 1e400
    const std::string where = at.path();
    return Error{fmt::format("{}{}a number is out of range ({})", label,
                             where.empty() ? std::string() : fmt::format("`{}`: ", where), withoutJsonPrefix(e.what()))};
  } catch (const Json::exception& e) {
    return Error{fmt::format("{}: {}{}not valid JSON: {}", file, lead, part.empty() ? "" : "is ",
                             withoutJsonPrefix(e.what()))};
  } catch (const std::exception& e) {
    return Error{fmt::format("{}could not be parsed: {}", label, e.what())};
  }
  // Text that does not parse says so first (above); text that parses but repeats a key, this.
  if (at.repeated()) return Error{label + *at.repeated()};
  return root;
}

}  // namespace osprey::io
