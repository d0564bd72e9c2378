// GPT-2 weights to an llm.c checkpoint (see save_llmc.hpp).
#include "gpt2/checkpoint/save_llmc.hpp"

#include <map>
#include <string>

#include "osprey/io/llmc_checkpoint.hpp"

namespace gpt2 {

osprey::Index llmcPaddedVocab(osprey::Index V) { return (V + 127) / 128 * 128; }

osprey::Result<std::uint64_t> saveLlmcCheckpoint(const std::filesystem::path& path, const HostWeights& weights,
                                                 osprey::io::DType dtype) {
  const Config& c = weights.config;
  const osprey::io::LlmcConfig lc{c.maxT, c.V, c.L, c.NH, c.C, llmcPaddedVocab(c.V)};
  const auto specs = parameterSpecs(c);
  if (specs.size() != weights.tensors.size())
    return osprey::Error{"cannot export: the weights do not hold every tensor of their config"};
  std::map<std::string, osprey::io::TensorData> tensors;
  std::uint64_t rounded = 0;
  std::vector<unsigned char> probe(16);
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const auto& values = weights.tensors[i].values;
    // A value the stored type cannot hold: encoding then decoding it gives another double.
    for (const osprey::Scalar v : values) {
      osprey::io::encodeValues(dtype, &v, 1, probe.data());
      osprey::Scalar back = 0.0;
      osprey::io::decodeValues(dtype, probe.data(), 1, &back);
      rounded += back != v;
    }
    tensors[specs[i].name] = osprey::io::TensorData{specs[i].shape, values};
  }
  OSPREY_CHECK(osprey::io::writeLlmcCheckpoint(path.string(), lc, tensors, dtype));
  return rounded;
}

}  // namespace gpt2
