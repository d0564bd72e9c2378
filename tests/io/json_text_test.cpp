// The one checked JSON reader (osprey/io/json_text.hpp): what it refuses, at any depth, and how
// it names the file and the key; and that what it accepts is exactly nlohmann's own parse.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "osprey/io/json_text.hpp"

namespace osprey::io {
namespace {

std::string refusal(const std::string& text, const JsonRules& rules = {}) {
  auto parsed = parseJson(text, "f.json", rules);
  return parsed.ok() ? std::string() : parsed.error().message;
}

struct Case {
  std::string text;
  std::string expected;  // the whole message
};

// A key given twice is refused wherever it is, named with the object holding it.
TEST(JsonText, AKeyGivenTwiceIsAnErrorAtAnyDepth) {
  const std::string tail = ": a JSON object's keys must differ (readers disagree on which one counts)";
  const std::vector<Case> cases{
      {R"({"a": 1, "a": 2})", "f.json: key `a` is given twice" + tail},
      {R"({"a": 1, "a": 1})", "f.json: key `a` is given twice" + tail},  // even with the same value
      {R"({"a": 1, "b": {"c": 1, "d": 2, "c": 3}})", "f.json: key `c` is given twice in `b`" + tail},
      {R"({"x": {"y": {"z": 1, "z": [1]}}})", "f.json: key `z` is given twice in `x.y`" + tail},
      {R"({"l": [{"k": 1}, {"k": 1, "k": 2}]})", "f.json: key `k` is given twice in `l[1]`" + tail},
      {R"([[0], {"k": 1, "k": 2}])", "f.json: key `k` is given twice in `[1]`" + tail},
      {R"({"l": [[1, 2], [3, {"q": 0, "q": 0}]]})", "f.json: key `q` is given twice in `l[1][1]`" + tail},
      {R"({"a": 1, "\u0061": 2})", "f.json: key `a` is given twice" + tail},  // the same key, escaped
      {R"({"": 1, "": 2})", "f.json: key `` is given twice" + tail},
      {"{\"t\\n\": 1, \"t\\n\": 2}", "f.json: key `t\\n` is given twice" + tail},
      // The first repeat is the one named.
      {R"({"a": 1, "a": 2, "b": 1, "b": 2})", "f.json: key `a` is given twice" + tail},
  };
  for (const Case& c : cases) EXPECT_EQ(refusal(c.text), c.expected) << c.text;
  // The same key in different objects, or a value repeated, is fine.
  EXPECT_EQ(refusal(R"({"a": {"k": 1}, "b": {"k": 1}, "c": [{"k": 1}, {"k": 1}], "k": "k"})"), "");
  // A part of a file names itself.
  EXPECT_EQ(refusal(R"({"w": {"dtype": "F32", "dtype": "F64"}})", {"header"}),
            "f.json: header: key `dtype` is given twice in `w`" + tail);
  // A long key is cut in the message.
  const std::string longKey(500, 'k');
  const std::string message = refusal("{\"" + longKey + "\": 1, \"" + longKey + "\": 2}");
  EXPECT_NE(message.find(std::string(80, 'k') + "..."), std::string::npos) << message;
  EXPECT_LT(message.size(), 300u);
}

TEST(JsonText, ANumberOutOfRangeNamesItsKey) {
  const std::vector<Case> cases{
      {R"({"eps": 1e400})", "f.json: `eps`: a number is out of range (number overflow parsing '1e400')"},
      {R"({"a": {"b": -1e999}})", "f.json: `a.b`: a number is out of range (number overflow parsing '-1e999')"},
      {R"({"shape": [1, 2, 1e400]})", "f.json: `shape[2]`: a number is out of range (number overflow parsing '1e400')"},
      {"1e400", "f.json: a number is out of range (number overflow parsing '1e400')"},
  };
  for (const Case& c : cases) EXPECT_EQ(refusal(c.text), c.expected) << c.text;
  // Text that does not parse says so before any repeated key.
  EXPECT_EQ(refusal(R"({"a": 1, "a": 1e400})"), "f.json: `a`: a number is out of range (number overflow parsing '1e400')");
  EXPECT_EQ(refusal(R"({"a": 1, "a": 2)").rfind("f.json: not valid JSON: ", 0), 0u);
  EXPECT_EQ(refusal(R"({"w": {"shape": [1e400]}})", {"header"}),
            "f.json: header: `w.shape[0]`: a number is out of range (number overflow parsing '1e400')");
}

TEST(JsonText, NotJsonAndTooDeep) {
  for (const std::string bad : {"", "{", "{\"a\": 1,}", "{} x", "{\"\xff\": 1}", "nan", "[1, 2"}) {
    EXPECT_EQ(refusal(bad).rfind("f.json: not valid JSON: ", 0), 0u) << bad << " -> " << refusal(bad);
    EXPECT_EQ(refusal(bad, {"header"}).rfind("f.json: header is not valid JSON: ", 0), 0u) << bad;
  }
  EXPECT_EQ(refusal(std::string(65, '[') + std::string(65, ']')), "f.json: JSON nests deeper than 64 levels");
  EXPECT_EQ(refusal(std::string(100000, '{'), {"header"}), "f.json: header JSON nests deeper than 64 levels");
  EXPECT_EQ(refusal("[[1]]", {"", 1}), "f.json: JSON nests deeper than 1 levels");
  EXPECT_EQ(refusal(std::string(64, '[') + std::string(64, ']')), "");
  EXPECT_EQ(refusal(R"({"[[[[": "{{{{"})", {"", 1}), "") << "brackets in strings do not nest";
}

TEST(JsonText, WhatItAcceptsIsNlohmannsOwnParse) {
  const std::string text = R"({"b": [1, -2, 3.5, 18446744073709551615, "s", null, true, {"x": {}}], "a": {"k": []}})";
  auto parsed = parseJson(text, "f.json");
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  EXPECT_EQ(*parsed, nlohmann::json::parse(text));
  EXPECT_TRUE((*parsed)["b"][3].is_number_unsigned());
}

}  // namespace
}  // namespace osprey::io
