// What a run asks of a handler (a "job"), and the entry points that run a job on each handler.
//
// Everything that does not depend on the handler is settled before one is chosen: the weights
// are read or initialised on the host, the prompt tokenized, its length checked. A job then runs
// on exactly one handler through one entry point:
//
//   runJobOnLists      (run_lists.cpp, g++)   the lists handler
//   runJobOnGpuHost    (run_host.cpp,  g++)   the gpu handler on the host device
//   runJobOnGpuCuda    (run_cuda.cu,   nvcc)  the gpu handler on the cuda device; exists only
//                                             when nvcc built gpt2_cuda (OSPREY_GPT2_HAVE_CUDA)
//   runJobOnFast       (run_fast.cu,   nvcc)  the fast handler (gpt2/fast/) on the cuda device;
//                                             the same condition
//
// Each entry point instantiates the one templated body (run_job.hpp) for its handler, so the
// model is compiled by the host compiler for lists and gpu/host, and by nvcc for cuda
// (DESIGN.md §3, CUDA notes). Adding a subcommand that runs on a handler: add its job struct to
// ModelJob and a `runJob(H&, YourJob&, const Streams&)` overload visible to run_job.hpp.
#pragma once

#include <functional>
#include <iosfwd>
#include <string>
#include <variant>
#include <vector>

#include "gpt2/sampling/sampling.hpp"
#include "gpt2/tokenizer/tokenizer.hpp"
#include "gpt2/train/job.hpp"  // TrainStepJob, TrainJob (train-step and train)
#include "gpt2/model/weights.hpp"
#include "osprey/result.hpp"

namespace gpt2 {

// Where a run writes: results on `out`, diagnostics and timings on `err`.
struct Streams {
  std::ostream& out;
  std::ostream& err;
};

// `generate`: print the header line, the prompt, then each token as it is chosen (greedy, or
// drawn with `sampling`).
struct GenerateJob {
  HostWeights weights;       // released once uploaded to the handler
  std::string label;         // "124M", "tiny": the header line's model name
  Tokenizer tokenizer;
  std::string promptText;    // printed as given
  std::vector<int> prompt;   // its token ids (at least one)
  Index tokens = 0;          // how many to generate
  bool timing = false;       // timings on `err`
  bool floatDecodeWeights = false;  // fast: decode from the float weights, not their bf16 copies
  sampling::SamplingSettings sampling;  // temperature 0 (the default): greedy
};

// `logits`: print the header line, then the last prompt position's V logits, one per line.
struct LogitsJob {
  HostWeights weights;
  std::string label;
  std::vector<int> prompt;
};

using ModelJob = std::variant<GenerateJob, LogitsJob, TrainStepJob, TrainJob>;

// An entry point, and a job's runner: an entry point, or one bound to its settings.
using HandlerRunner = osprey::Result<void> (*)(ModelJob& job, const Streams& streams);
using JobRunner = std::function<osprey::Result<void>(ModelJob& job, const Streams& streams)>;

// What the fast handler's linear layers multiply (FastHandler::Products): bf16 twins of their
// operands (the default) or the floats on the TF32 tensor cores. `--products`.
enum class FastProducts { Bf16, Tf32 };
using FastRunner = osprey::Result<void> (*)(ModelJob& job, const Streams& streams, FastProducts products);

osprey::Result<void> runJobOnLists(ModelJob& job, const Streams& streams);
osprey::Result<void> runJobOnGpuHost(ModelJob& job, const Streams& streams);
osprey::Result<void> runJobOnGpuCuda(ModelJob& job, const Streams& streams);  // nvcc builds only
osprey::Result<void> runJobOnGpuOpenCl(ModelJob& job, const Streams& streams);  // builds with OpenCL only
osprey::Result<void> runJobOnFast(ModelJob& job, const Streams& streams, FastProducts products);  // nvcc only

// The entry points a program links. The cuda ones are null when the program was built without
// nvcc: choosing one is then an error that says so, never a run on another device.
struct HandlerEntries {
  HandlerRunner lists = nullptr;
  HandlerRunner gpuHost = nullptr;
  HandlerRunner gpuCuda = nullptr;
  FastRunner fast = nullptr;
  HandlerRunner gpuOpenCl = nullptr;
};

// lists and gpu/host; gpuCuda, fast and gpuOpenCl left null (main.cpp adds them when gpt2_cuda and
// gpt2_opencl are linked).
HandlerEntries hostEntries();

// --backend / --device (or $OSPREY_GPU) -> the entry point, or the error naming the bad choice:
//   "unknown backend `x`: choose gpu, fast or lists", "unknown gpu device `x`: choose host, cuda or opencl".
// The fast backend runs on the cuda device only; --products (bf16 or tf32) applies to it alone.
struct BackendChoice {
  std::string backend = "lists";
  std::string device;    // empty: $OSPREY_GPU, else host (gpu backend only)
  std::string products;  // empty: bf16 (fast backend only)
};
osprey::Result<JobRunner> selectRunner(const BackendChoice& choice, const HandlerEntries& entries);

}  // namespace gpt2
