// Writing llm.c checkpoints from Hugging Face GPT-2 tensors (for tests and for llm.c users).
#include <array>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "osprey/io/atomic_file.hpp"
#include "osprey/io/llmc_checkpoint.hpp"

namespace osprey::io {
namespace {

void appendInt(std::string& bytes, std::int32_t value) {
  const auto bits = static_cast<std::uint32_t>(value);
  for (int k = 0; k < 4; ++k) bytes.push_back(static_cast<char>(bits >> (8 * k)));
}

// The values in llm.c's layout: transposed back to (out, in), wte padded with zero rows.
std::vector<Scalar> llmcOrder(const LlmcConfig& config, const LlmcSlice& slice, const std::vector<Scalar>& hf) {
  if (slice.transposed) {
    const auto in = static_cast<std::size_t>(slice.hfShape[0]);
    const auto out = static_cast<std::size_t>(slice.hfShape[1]);
    std::vector<Scalar> linear(hf.size());  // (out, in)
    for (std::size_t o = 0; o < out; ++o) {
      for (std::size_t i = 0; i < in; ++i) linear[o * in + i] = hf[i * out + o];
    }
    return linear;
  }
  std::vector<Scalar> values = hf;
  if (slice.hfShape.size() == 2 && slice.hfShape[0] == config.V && slice.firstElement == 0) {
    values.resize(static_cast<std::size_t>(config.Vp * config.C), 0.0);  // wte: rows V..Vp
  }
  return values;
}

}  // namespace

Result<void> writeLlmcCheckpoint(const std::string& path, const LlmcConfig& config,
                                 const std::map<std::string, TensorData>& tensors, DType dtype) {
  if (dtype != DType::F32 && dtype != DType::BF16) {
    return fileError(path, fmt::format("cannot write an llm.c checkpoint as {} (F32 or BF16)", dtypeName(dtype)));
  }
  OSPREY_CHECK(checkLlmcConfig(path, config));

  std::string header;
  const std::array<std::int32_t, 8> fields{kLlmcMagic,
                                           dtype == DType::BF16 ? kLlmcVersionBF16 : kLlmcVersionF32,
                                           static_cast<std::int32_t>(config.maxT),
                                           static_cast<std::int32_t>(config.V),
                                           static_cast<std::int32_t>(config.L),
                                           static_cast<std::int32_t>(config.NH),
                                           static_cast<std::int32_t>(config.C),
                                           static_cast<std::int32_t>(config.Vp)};
  for (std::int32_t field : fields) appendInt(header, field);
  header.resize(kLlmcHeaderBytes, '\0');

  AtomicFile file = OSPREY_TRY(AtomicFile::create(path));
  OSPREY_CHECK(file.write(header));
  // llm.c's block order: every layer's ln1w, then every layer's ln1b, ... (not layer by layer).
  const std::vector<std::string> names = llmcTensorNames(config);
  const auto perLayer = (names.size() - 4) / static_cast<std::size_t>(config.L);
  std::vector<std::string> order{names[0], names[1]};
  for (std::size_t b = 0; b < perLayer; ++b) {
    for (std::size_t l = 0; l < static_cast<std::size_t>(config.L); ++l) order.push_back(names[2 + l * perLayer + b]);
  }
  order.push_back(names[names.size() - 2]);
  order.push_back(names[names.size() - 1]);

  std::vector<unsigned char> bytes;
  for (const std::string& name : order) {
    const auto found = tensors.find(name);
    if (found == tensors.end()) return fileError(path, fmt::format("cannot write: no tensor `{}` given", name));
    const LlmcSlice slice = *llmcSlice(config, name);
    const TensorData& tensor = found->second;
    if (tensor.shape != slice.hfShape || tensor.values.size() != slice.elementCount) {
      return fileError(path, fmt::format("cannot write: tensor `{}` has shape [{}], expected [{}]", name,
                                         fmt::join(tensor.shape, ", "), fmt::join(slice.hfShape, ", ")));
    }
    const std::vector<Scalar> values = llmcOrder(config, slice, tensor.values);
    bytes.resize(values.size() * dtypeBytes(dtype));
    encodeValues(dtype, values.data(), values.size(), bytes.data());
    OSPREY_CHECK(file.write(bytes.data(), bytes.size()));
  }
  return file.commit();
}

}  // namespace osprey::io
