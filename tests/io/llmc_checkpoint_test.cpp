// llm.c checkpoints: a tiny model written and read back under Hugging Face names, with the
// layout on disk checked element by element against llm.c's order (transposes included), and
// every malformed header or length refused with the file's name.
#include <bit>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "io/io_test_files.hpp"
#include "osprey/io/llmc_checkpoint.hpp"
#include "osprey/io/tensor_file.hpp"

namespace osprey::io {
namespace {

using testing::ScratchDir;

// maxT, V, L, NH, C, Vp: small, with V padded (5 -> 8) so dropping padding rows is visible.
constexpr LlmcConfig kTiny{4, 5, 2, 2, 4, 8};
constexpr Index C = kTiny.C;

// Hugging Face shapes, written out by hand (not taken from the code under test).
std::map<std::string, std::vector<Index>> hfShapes() {
  std::map<std::string, std::vector<Index>> shapes{{"wte.weight", {kTiny.V, C}},
                                                   {"wpe.weight", {kTiny.maxT, C}},
                                                   {"ln_f.weight", {C}},
                                                   {"ln_f.bias", {C}}};
  for (int l = 0; l < kTiny.L; ++l) {
    const std::string h = "h." + std::to_string(l) + ".";
    shapes[h + "ln_1.weight"] = {C};
    shapes[h + "ln_1.bias"] = {C};
    shapes[h + "attn.c_attn.weight"] = {C, 3 * C};
    shapes[h + "attn.c_attn.bias"] = {3 * C};
    shapes[h + "attn.c_proj.weight"] = {C, C};
    shapes[h + "attn.c_proj.bias"] = {C};
    shapes[h + "ln_2.weight"] = {C};
    shapes[h + "ln_2.bias"] = {C};
    shapes[h + "mlp.c_fc.weight"] = {C, 4 * C};
    shapes[h + "mlp.c_fc.bias"] = {4 * C};
    shapes[h + "mlp.c_proj.weight"] = {4 * C, C};
    shapes[h + "mlp.c_proj.bias"] = {C};
  }
  return shapes;
}

// Every element distinct and exact in float32: tensor number * 1000 + element index.
std::map<std::string, TensorData> tinyModel() {
  std::map<std::string, TensorData> tensors;
  int number = 1;
  for (const auto& [name, shape] : hfShapes()) {
    TensorData t;
    t.shape = shape;
    Index count = 1;
    for (Index d : shape) count *= d;
    for (Index i = 0; i < count; ++i) t.values.push_back(number * 1000.0 + static_cast<Scalar>(i));
    tensors[name] = t;
    ++number;
  }
  return tensors;
}

// llm.c's parameter blocks in file order, with their element counts for kTiny.
struct RawBlock {
  const char* name;
  Index elements;
};
const std::vector<RawBlock> kRawBlocks{
    {"wte", 8 * C},           {"wpe", 4 * C},         {"ln1w", 2 * C},     {"ln1b", 2 * C},
    {"qkvw", 2 * 3 * C * C},  {"qkvb", 2 * 3 * C},    {"attprojw", 2 * C * C}, {"attprojb", 2 * C},
    {"ln2w", 2 * C},          {"ln2b", 2 * C},        {"fcw", 2 * 4 * C * C},  {"fcb", 2 * 4 * C},
    {"fcprojw", 2 * C * 4 * C}, {"fcprojb", 2 * C},   {"lnfw", C},         {"lnfb", C}};

// The float32 parameters as they sit in the file after the 1024-byte header.
struct RawFile {
  std::vector<std::int32_t> header;
  std::vector<float> params;

  float at(const char* block, Index offset) const {
    Index start = 0;
    for (const RawBlock& b : kRawBlocks) {
      if (std::string(b.name) == block) return params[static_cast<std::size_t>(start + offset)];
      start += b.elements;
    }
    ADD_FAILURE() << "no block " << block;
    return 0;
  }
};

RawFile readRaw(const std::string& path) {
  const std::string bytes = testing::readBytes(path);
  RawFile raw;
  raw.header.resize(256);
  std::memcpy(raw.header.data(), bytes.data(), 1024);
  raw.params.resize((bytes.size() - 1024) / 4);
  std::memcpy(raw.params.data(), bytes.data() + 1024, raw.params.size() * 4);
  return raw;
}

std::string writeTiny(const ScratchDir& dir, DType dtype = DType::F32) {
  const std::string path = dir.file(dtype == DType::F32 ? "tiny.bin" : "tiny_bf16.bin");
  auto written = writeLlmcCheckpoint(path, kTiny, tinyModel(), dtype);
  EXPECT_TRUE(written.ok()) << (written.ok() ? "" : written.error().message);
  return path;
}

TEST(LlmcCheckpoint, TinyModelReadsBackUnderHuggingFaceNames) {
  ScratchDir dir;
  const std::string path = writeTiny(dir);
  auto file = LlmcCheckpoint::open(path);
  ASSERT_TRUE(file.ok()) << file.error().message;
  EXPECT_EQ(file->version(), 3);
  EXPECT_EQ(file->dtype(), DType::F32);
  EXPECT_EQ(file->config().maxT, 4);
  EXPECT_EQ(file->config().V, 5);
  EXPECT_EQ(file->config().L, 2);
  EXPECT_EQ(file->config().NH, 2);
  EXPECT_EQ(file->config().C, 4);
  EXPECT_EQ(file->config().Vp, 8);

  const auto model = tinyModel();
  const std::vector<std::string> names = file->names();
  ASSERT_EQ(names.size(), model.size());
  EXPECT_EQ(names.front(), "wte.weight");
  EXPECT_EQ(names[2], "h.0.ln_1.weight");
  EXPECT_EQ(names.back(), "ln_f.bias");
  for (const std::string& name : names) {
    auto data = file->read(name);
    ASSERT_TRUE(data.ok()) << data.error().message;
    EXPECT_EQ(data->shape, model.at(name).shape) << name;
    EXPECT_EQ(data->values, model.at(name).values) << name;
    EXPECT_EQ(file->info(name)->shape, model.at(name).shape) << name;
  }
}

TEST(LlmcCheckpoint, FileLayoutIsLlmcsWithTheConv1DWeightsTransposed) {
  ScratchDir dir;
  const std::string path = writeTiny(dir);
  const RawFile raw = readRaw(path);
  ASSERT_EQ(raw.params.size(), 544u);  // Vp*C + maxT*C + L*(12C^2 + 13C) + 2C
  EXPECT_EQ(raw.header[0], 20240326);
  EXPECT_EQ(raw.header[1], 3);
  EXPECT_EQ((std::vector<std::int32_t>(raw.header.begin() + 2, raw.header.begin() + 8)),
            (std::vector<std::int32_t>{4, 5, 2, 2, 4, 8}));
  for (std::size_t k = 8; k < 256; ++k) EXPECT_EQ(raw.header[k], 0);

  const auto model = tinyModel();
  auto hf = [&](const std::string& name, Index row, Index col) {
    const TensorData& t = model.at(name);
    return static_cast<float>(t.values[static_cast<std::size_t>(row * t.shape[1] + col)]);
  };
  // wte: the V real rows, then zero padding up to Vp.
  for (Index v = 0; v < 8; ++v) {
    for (Index c = 0; c < C; ++c) EXPECT_EQ(raw.at("wte", v * C + c), v < 5 ? hf("wte.weight", v, c) : 0.0f);
  }
  for (int l = 0; l < 2; ++l) {
    const std::string h = "h." + std::to_string(l) + ".";
    // qkvw (L, 3C, C): llm.c[l][o][i] == HF c_attn.weight[i][o]
    for (Index o = 0; o < 3 * C; ++o) {
      for (Index i = 0; i < C; ++i) {
        EXPECT_EQ(raw.at("qkvw", l * 3 * C * C + o * C + i), hf(h + "attn.c_attn.weight", i, o));
      }
    }
    // attprojw (L, C, C)
    for (Index o = 0; o < C; ++o) {
      for (Index i = 0; i < C; ++i) {
        EXPECT_EQ(raw.at("attprojw", l * C * C + o * C + i), hf(h + "attn.c_proj.weight", i, o));
      }
    }
    // fcw (L, 4C, C)
    for (Index o = 0; o < 4 * C; ++o) {
      for (Index i = 0; i < C; ++i) {
        EXPECT_EQ(raw.at("fcw", l * 4 * C * C + o * C + i), hf(h + "mlp.c_fc.weight", i, o));
      }
    }
    // fcprojw (L, C, 4C)
    for (Index o = 0; o < C; ++o) {
      for (Index i = 0; i < 4 * C; ++i) {
        EXPECT_EQ(raw.at("fcprojw", l * 4 * C * C + o * 4 * C + i), hf(h + "mlp.c_proj.weight", i, o));
      }
    }
    // Vectors are stored as they are, layer after layer.
    for (Index c = 0; c < 3 * C; ++c) {
      EXPECT_EQ(raw.at("qkvb", l * 3 * C + c), static_cast<float>(model.at(h + "attn.c_attn.bias").values[c]));
    }
    for (Index c = 0; c < C; ++c) {
      EXPECT_EQ(raw.at("ln2b", l * C + c), static_cast<float>(model.at(h + "ln_2.bias").values[c]));
    }
  }
  for (Index c = 0; c < C; ++c) EXPECT_EQ(raw.at("lnfb", c), static_cast<float>(model.at("ln_f.bias").values[c]));
}

TEST(LlmcCheckpoint, Bfloat16Version5) {
  ScratchDir dir;
  const std::string path = writeTiny(dir, DType::BF16);
  auto file = LlmcCheckpoint::open(path);
  ASSERT_TRUE(file.ok()) << file.error().message;
  EXPECT_EQ(file->version(), 5);
  EXPECT_EQ(file->dtype(), DType::BF16);
  EXPECT_EQ(std::filesystem::file_size(path), 1024u + 2u * 544u);
  const auto model = tinyModel();
  for (const std::string& name : file->names()) {
    auto data = file->read(name);
    ASSERT_TRUE(data.ok());
    const std::vector<Scalar>& written = model.at(name).values;
    ASSERT_EQ(data->values.size(), written.size());
    for (std::size_t i = 0; i < written.size(); ++i) {
      EXPECT_EQ(data->values[i], bfloat16BitsToDouble(floatToBfloat16Bits(static_cast<float>(written[i]))));
    }
  }
}

TEST(LlmcCheckpoint, ReadTensorRecognisesTheMagic) {
  ScratchDir dir;
  const std::string path = writeTiny(dir);
  auto viaReadTensor = readTensor(path, "h.1.mlp.c_proj.weight");
  ASSERT_TRUE(viaReadTensor.ok()) << viaReadTensor.error().message;
  EXPECT_EQ(viaReadTensor->shape, (std::vector<Index>{16, 4}));
  EXPECT_EQ(viaReadTensor->values, tinyModel().at("h.1.mlp.c_proj.weight").values);
  auto file = TensorFile::open(path);
  ASSERT_TRUE(file.ok());
  EXPECT_TRUE(file->isLlmc());
  EXPECT_EQ(file->names().size(), 2u + 12u * 2u + 2u);
}

TEST(LlmcCheckpoint, UnknownNamesAreRefused) {
  ScratchDir dir;
  const std::string path = writeTiny(dir);
  for (const char* name : {"h.2.ln_1.weight", "h.01.ln_1.weight", "h.-1.ln_1.weight", "h..ln_1.weight",
                           "h.0.attn.bias", "lm_head.weight", "transformer.wte.weight", "h.0.wte.weight",
                           "ln_1.weight", ""}) {
    auto data = readTensor(path, name);
    ASSERT_FALSE(data.ok()) << name;
    EXPECT_EQ(data.error().message.rfind(path + ": no tensor named `" + name + "`", 0), 0u) << data.error().message;
  }
}

TEST(LlmcCheckpoint, Gpt2SmallHas148TensorsAnd124MParameters) {
  const LlmcConfig gpt2{1024, 50257, 12, 12, 768, 50304};
  EXPECT_EQ(llmcTensorNames(gpt2).size(), 148u);
  EXPECT_EQ(llmcParameterCount(gpt2), 124'475'904u);  // llm.c's "num_parameters" for gpt2_124M.bin
  const auto wte = llmcSlice(gpt2, "wte.weight");
  ASSERT_TRUE(wte.has_value());
  EXPECT_EQ(wte->hfShape, (std::vector<Index>{50257, 768}));
  const auto fc = llmcSlice(gpt2, "h.11.mlp.c_fc.weight");
  ASSERT_TRUE(fc.has_value());
  EXPECT_EQ(fc->hfShape, (std::vector<Index>{768, 3072}));
  EXPECT_TRUE(fc->transposed);
}

// A valid tiny file's bytes with one header int replaced.
std::string withHeaderInt(const std::string& bytes, int index, std::int32_t value) {
  std::string copy = bytes;
  std::memcpy(copy.data() + 4 * index, &value, 4);
  return copy;
}

TEST(LlmcCheckpoint, MalformedFilesAreRefusedWithTheFileName) {
  ScratchDir dir;
  const std::string good = testing::readBytes(writeTiny(dir));
  const std::string path = dir.file("bad.bin");
  struct Case {
    const char* what;
    std::string bytes;
    const char* expected;
  };
  const std::vector<Case> cases{
      {"header cut short", good.substr(0, 100), "file is 100 bytes, shorter than the 1024-byte llm.c header"},
      {"bad magic", withHeaderInt(good, 0, 20240327), "not an llm.c checkpoint: bad magic number 20240327"},
      {"version 2", withHeaderInt(good, 1, 2), "unsupported llm.c checkpoint version 2"},
      {"version 4", withHeaderInt(good, 1, 4), "unsupported llm.c checkpoint version 4"},
      {"zero layers", withHeaderInt(good, 4, 0), "L (layers) = 0, outside 1..4096"},
      {"negative channels", withHeaderInt(good, 6, -4), "C (channels) = -4, outside"},
      {"absurd context", withHeaderInt(good, 2, 1 << 30), "maxT (context length) = 1073741824, outside"},
      {"absurd vocabulary", withHeaderInt(good, 3, 2'000'000'000), "V (vocabulary) = 2000000000, outside"},
      {"Vp below V", withHeaderInt(good, 7, 4), "padded vocabulary Vp = 4 smaller than V = 5"},
      {"heads not dividing C", withHeaderInt(good, 5, 3), "C = 4 channels, not divisible by NH = 3 heads"},
      {"truncated", good.substr(0, good.size() - 4), "truncated: the header's shapes need 3200 bytes, the file has 3196"},
      {"trailing bytes", good + "abcd", "has 3204 bytes, 4 more than the header's shapes need (3200)"},
      {"big layer count", withHeaderInt(good, 4, 4000), "truncated"},
  };
  for (const Case& c : cases) {
    testing::writeBytes(path, c.bytes);
    auto file = LlmcCheckpoint::open(path);
    ASSERT_FALSE(file.ok()) << c.what;
    EXPECT_EQ(file.error().message.rfind(path + ": ", 0), 0u) << c.what << ": " << file.error().message;
    EXPECT_NE(file.error().message.find(c.expected), std::string::npos) << c.what << ": " << file.error().message;
  }
  // Through readTensor, a short file with the llm.c magic is an llm.c error, not a safetensors one.
  testing::writeBytes(path, good.substr(0, 100));
  auto viaReadTensor = readTensor(path, "wte.weight");
  ASSERT_FALSE(viaReadTensor.ok());
  EXPECT_NE(viaReadTensor.error().message.find("1024-byte llm.c header"), std::string::npos);
}

TEST(LlmcCheckpoint, WriterRefusesMissingOrMisshapenTensors) {
  ScratchDir dir;
  auto model = tinyModel();
  model.erase("h.1.ln_2.bias");
  auto missing = writeLlmcCheckpoint(dir.file("m.bin"), kTiny, model);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("no tensor `h.1.ln_2.bias` given"), std::string::npos);

  model = tinyModel();
  model["h.0.attn.c_attn.weight"].shape = {3 * C, C};  // llm.c's orientation, not Hugging Face's
  auto misshapen = writeLlmcCheckpoint(dir.file("m.bin"), kTiny, model);
  ASSERT_FALSE(misshapen.ok());
  EXPECT_NE(misshapen.error().message.find("tensor `h.0.attn.c_attn.weight` has shape [12, 4], expected [4, 12]"),
            std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(dir.file("m.bin")));
}

}  // namespace
}  // namespace osprey::io
