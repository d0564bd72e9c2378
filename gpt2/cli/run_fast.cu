// The run body instantiated for the fast handler (float storage, the linear layers' products on
// bf16 twins of their operands unless --products tf32, the fused layers of gpt2/fast/, decoding
// from bf16 weight copies unless the job asks for the floats),
// compiled by nvcc from the same headers as every other handler's.
#include "gpt2/fast/fast_handler.hpp"
#include "gpt2/cli/run_job.hpp"
#include "osprey/under.hpp"

namespace gpt2 {

template osprey::Result<void> runJob<FastHandler>(FastHandler&, ModelJob&, const Streams&);

osprey::Result<void> runJobOnFast(ModelJob& job, const Streams& streams, FastProducts products) {
  // A continuation whose shape a decoding kernel cannot take stops here, naming the kernel, before
  // the weights go to the device (fast/shape_support.hpp; training has no such limit).
  if (const auto* generate = std::get_if<GenerateJob>(&job))
    if (auto problem = fast_shapes::decodingProblem(generate->weights.config)) return osprey::Error{*problem};
  return osprey::onFast<FastHandler>([&](FastHandler& h) {
    h.setProducts(products == FastProducts::Tf32 ? FastHandler::Products::Tf32 : FastHandler::Products::Bf16);
    if (const auto* generate = std::get_if<GenerateJob>(&job); generate && generate->floatDecodeWeights)
      h.setDecodeWeights(FastHandler::DecodeWeights::Float);
    return runJob(h, job, streams);
  });
}

}  // namespace gpt2
