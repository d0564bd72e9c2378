// osprey-gpt2's command line, run in-process: output contract (header line, identical text on
// every handler), backend choice errors, prompt checks, tokenize/detokenize, init, logits.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <future>
#include <sstream>

#include "gpt2/cli/cli.hpp"
#include "gpt2/model/generate.hpp"
#include "gpt2/model/init.hpp"
#include "gpt2/cli_lines.hpp"
#include "gpt2/temp_dir.hpp"
#include "osprey/lists/lists.hpp"

namespace gpt2 {
namespace {

using testing::ScopedEnv;
using testing::TempDir;

struct Run {
  int status;
  std::string out, err;
};

// osprey-gpt2 with `args`, linked with the host handlers only (as a build without nvcc is).
Run run(std::vector<std::string> args) {
  args.insert(args.begin(), "osprey-gpt2");
  std::ostringstream out, err;
  const int status = runCli(args, hostEntries(), out, err);
  return Run{status, out.str(), err.str()};
}

using testing::afterFirstLine;

std::string firstLine(const std::string& s) { return s.substr(0, s.find('\n')); }

const std::vector<std::string> kTinyGenerate{"generate", "--preset", "tiny", "--prompt",
                                             "The capital of France is", "--tokens", "12"};

// The tiny generation above with more options after it.
Run runTinyGenerate(const std::vector<std::string>& options) {
  auto args = kTinyGenerate;
  args.insert(args.end(), options.begin(), options.end());
  return run(args);
}

TEST(Gpt2Cli, GenerateOnListsAndGpuHostPrintsTheSameTextAfterTheHeader) {
  auto lists = run(kTinyGenerate);
  ASSERT_EQ(lists.status, 0) << lists.err;
  auto host = runTinyGenerate({"--backend", "gpu", "--device", "host"});
  ASSERT_EQ(host.status, 0) << host.err;

  EXPECT_EQ(firstLine(lists.out), "gpt2 (tiny) on lists");
  EXPECT_EQ(firstLine(host.out), "gpt2 (tiny) on host");
  EXPECT_EQ(afterFirstLine(lists.out), afterFirstLine(host.out));
  EXPECT_TRUE(afterFirstLine(lists.out).starts_with("The capital of France is"));
  EXPECT_TRUE(lists.out.ends_with("\n"));
  // The fresh initialisation is said plainly, on stderr; no timings unless asked.
  EXPECT_NE(lists.err.find("using GPT-2's initialisation with seed 1337"), std::string::npos) << lists.err;
  EXPECT_EQ(lists.err.find("timing"), std::string::npos);
}

TEST(Gpt2Cli, GeneratedTextIsThePromptAndTheGreedyTokens) {
  auto r = run(kTinyGenerate);
  ASSERT_EQ(r.status, 0) << r.err;
  // The same continuation computed directly.
  osprey::Lists h;
  auto w = prepareForward(h, std::move(*upload(h, initialWeights(kGpt2Tiny, kDefaultSeed))));
  ASSERT_TRUE(w.ok());
  const std::vector<int> prompt{464, 3139, 286, 4881, 318};
  auto none = [](int) -> osprey::Result<void> { return {}; };
  auto ids = generateGreedy(h, *w, std::span<const int>(prompt), 12, none);
  ASSERT_TRUE(ids.ok());
  auto tokenizer = Tokenizer::load(testing::tokenizerDir());
  ASSERT_TRUE(tokenizer.ok());
  EXPECT_EQ(afterFirstLine(r.out), "The capital of France is" + *tokenizer->decode(*ids) + "\n");
}

TEST(Gpt2Cli, TimingGoesToStderrOnlyWhenAsked) {
  auto r = runTinyGenerate({"--timing"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("timing:"), std::string::npos);
  EXPECT_EQ(r.out.find("timing"), std::string::npos);
}

// The fast backend lives on the cuda device only: asking for it on the host is an error naming
// why, and on a machine without a GPU (CI) it is the cuda device's own error; nothing runs.
TEST(Gpt2Cli, FastBackendNeedsTheCudaDevice) {
  auto r = runTinyGenerate({"--backend", "fast", "--device", "host"});
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("device `host`: the fast backend runs on the cuda device only"), std::string::npos) << r.err;

  r = runTinyGenerate({"--backend", "fast"});
  if (r.status == 0) {
    EXPECT_EQ(r.out.rfind("gpt2 (tiny) on fast cuda: ", 0), 0u) << r.out;  // a GPU is present
  } else {
    EXPECT_EQ(r.status, 1);
    EXPECT_EQ(r.out, "");
    const bool named = r.err.find("no CUDA device") != std::string::npos ||
                       r.err.find("backend `fast` runs on a CUDA device") != std::string::npos;
    EXPECT_TRUE(named) << r.err;
  }
}

TEST(Gpt2Cli, UnknownBackendAndDeviceAreErrors) {
  auto r = runTinyGenerate({"--backend", "tpu"});
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("unknown backend `tpu`: choose gpu, fast or lists"), std::string::npos) << r.err;

  r = runTinyGenerate({"--backend", "gpu", "--device", "metal"});
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("unknown gpu device `metal`: choose host, cuda or opencl"), std::string::npos) << r.err;

  ScopedEnv gpu("OSPREY_GPU", "vulkan");
  r = runTinyGenerate({"--backend", "gpu"});
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("unknown gpu device `vulkan`"), std::string::npos) << r.err;
}

TEST(Gpt2Cli, CudaWithoutNvccIsAnErrorNeverAHostRun) {
  auto r = runTinyGenerate({"--backend", "gpu", "--device", "cuda"});
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("built without nvcc"), std::string::npos) << r.err;

  ScopedEnv gpu("OSPREY_GPU", "cuda");
  r = runTinyGenerate({"--backend", "gpu"});
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("cuda"), std::string::npos) << r.err;
}

TEST(Gpt2Cli, PromptsThatDoNotFitAreErrors) {
  auto r = run({"generate", "--preset", "tiny", "--prompt", "The capital of France is", "--tokens", "124"});
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("the prompt is 5 tokens and 124 more were asked for"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("context of 128"), std::string::npos) << r.err;
  auto fits = run({"generate", "--preset", "tiny", "--prompt", "The capital of France is", "--tokens", "123"});
  EXPECT_EQ(fits.status, 0) << fits.err;

  auto empty = run({"generate", "--preset", "tiny", "--prompt", "", "--tokens", "3"});
  EXPECT_EQ(empty.status, 1);
  EXPECT_NE(empty.err.find("the prompt is empty"), std::string::npos) << empty.err;

  auto negative = run({"generate", "--preset", "tiny", "--prompt", "x", "--tokens", "-2"});
  EXPECT_NE(negative.status, 0);
}

// The choice of decoding weights is the fast backend's: asking another backend for either is an
// error naming the option (the other backends always decode from the model's own weights).
TEST(Gpt2Cli, DecodeWeightsBelongToTheFastBackend) {
  auto r = runTinyGenerate({"--backend", "lists", "--decode-weights", "bf16"});
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("--decode-weights bf16 applies to the fast backend; the lists backend"), std::string::npos)
      << r.err;
  const auto floats = runTinyGenerate({"--backend", "lists", "--decode-weights", "float"});
  EXPECT_EQ(floats.status, 1);
  EXPECT_EQ(floats.out, "");
  EXPECT_NE(floats.err.find("--decode-weights float applies to the fast backend; the lists backend"),
            std::string::npos)
      << floats.err;
  EXPECT_NE(runTinyGenerate({"--decode-weights", "fp8"}).status, 0);
}

// The kind of product is the fast backend's to choose: another backend refuses --products, naming
// it, and an unknown kind is refused by the parser.
TEST(Gpt2Cli, ProductsBelongToTheFastBackend) {
  auto r = runTinyGenerate({"--backend", "lists", "--products", "tf32"});
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("--products tf32 applies to the fast backend; the lists backend"), std::string::npos) << r.err;
  auto gpu = runTinyGenerate({"--backend", "gpu", "--device", "host", "--products", "bf16"});
  EXPECT_EQ(gpu.status, 1);
  EXPECT_NE(gpu.err.find("--products bf16 applies to the fast backend; the gpu backend"), std::string::npos) << gpu.err;
  EXPECT_NE(runTinyGenerate({"--products", "fp8"}).status, 0);
}

TEST(Gpt2Cli, AnyBytesArePrompts) {
  // Invalid UTF-8 and a NUL-free control byte: byte-level BPE encodes them; the text round-trips.
  const std::string prompt = "caf\xc3\xa9 \xff\xfe\x01 \xe2\x82";
  auto r = run({"generate", "--preset", "tiny", "--prompt", prompt, "--tokens", "2"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(afterFirstLine(r.out).starts_with(prompt));
}

TEST(Gpt2Cli, TokenizeAndDetokenize) {
  auto r = run({"tokenize", "Hello world"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "15496 995\n");
  r = run({"tokenize", "The capital of France is"});
  EXPECT_EQ(r.out, "464 3139 286 4881 318\n");
  r = run({"detokenize", "464", "3139", "286", "4881", "318"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "The capital of France is\n");
  r = run({"detokenize", "99999"});
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("99999"), std::string::npos) << r.err;
}

TEST(Gpt2Cli, InitWritesADirectoryThatGenerateLoads) {
  TempDir tmp;
  const std::string dir = (tmp / "tiny").string();
  auto init = run({"init", "--preset", "tiny", "--dtype", "f64", "--out", dir});
  ASSERT_EQ(init.status, 0) << init.err;
  EXPECT_NE(init.out.find("seed 1337"), std::string::npos) << init.out;

  auto fromDir = run({"generate", "--model", dir, "--prompt", "The capital of France is", "--tokens", "12"});
  ASSERT_EQ(fromDir.status, 0) << fromDir.err;
  auto fresh = run(kTinyGenerate);
  EXPECT_EQ(fromDir.out, fresh.out);  // same header (tiny, lists) and the same text
  EXPECT_EQ(fromDir.err.find("initialisation"), std::string::npos) << "a checkpoint was read";

  auto bad = run({"init", "--preset", "huge", "--out", dir});
  EXPECT_NE(bad.status, 0);
}

TEST(Gpt2Cli, LogitsArePrintedWith17SignificantDigits) {
  TempDir tmp;
  const std::string dir = (tmp / "tiny").string();
  ASSERT_EQ(run({"init", "--preset", "tiny", "--dtype", "f64", "--out", dir}).status, 0);
  auto lists = run({"logits", "--model", dir, "--prompt", "The capital of France is"});
  ASSERT_EQ(lists.status, 0) << lists.err;
  auto host = run({"logits", "--model", dir, "--prompt", "The capital of France is", "--backend", "gpu"});
  ASSERT_EQ(host.status, 0) << host.err;
  EXPECT_EQ(firstLine(lists.out), "gpt2 (tiny) on lists");
  EXPECT_EQ(afterFirstLine(lists.out), afterFirstLine(host.out));

  // The printed values parse back to exactly the prefill's logits.
  osprey::Lists h;
  auto w = prepareForward(h, std::move(*upload(h, initialWeights(kGpt2Tiny, kDefaultSeed))));
  ASSERT_TRUE(w.ok());
  const std::vector<int> prompt{464, 3139, 286, 4881, 318};
  auto tokens = tokenBuffer(h, std::span<const int>(prompt));
  auto step = prefill(h, *w, *tokens, 5);
  ASSERT_TRUE(step.ok());
  std::istringstream lines(afterFirstLine(lists.out));
  std::string line;
  std::size_t count = 0;
  while (std::getline(lines, line)) {
    ASSERT_LT(count, step->logits.values().size());
    const double parsed = std::strtod(line.c_str(), nullptr);
    ASSERT_EQ(std::memcmp(&parsed, &step->logits.values()[count], sizeof parsed), 0) << "line " << count;
    ++count;
  }
  EXPECT_EQ(count, 50257u);
}

// A FIFO (or another non-regular file) where a file is read is an error naming it, at once: an
// open for reading would otherwise wait forever for a writer. Each case runs under a watchdog
// thread's deadline, so a regression fails the test instead of hanging the suite.
TEST(Gpt2Cli, AFifoInPlaceOfAFileIsAnErrorNotAHang) {
  TempDir tmp;
  const std::string dir = (tmp / "model").string();
  ASSERT_EQ(run({"init", "--preset", "tiny", "--dtype", "f64", "--out", dir}).status, 0);
  const auto fifoInstead = [&](const std::string& name) {
    const std::string path = dir + "/" + name;
    std::filesystem::rename(path, path + ".real");
    ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0) << path;
  };
  const auto restore = [&](const std::string& name) {
    const std::string path = dir + "/" + name;
    std::filesystem::remove(path);
    std::filesystem::rename(path + ".real", path);
  };
  const auto runWithin = [&](std::vector<std::string> args) {
    auto result = std::async(std::launch::async, [args] { return run(args); });
    if (result.wait_for(std::chrono::seconds(60)) != std::future_status::ready) {
      ADD_FAILURE() << "osprey-gpt2 did not return within 60 s: it waits on a FIFO";
      std::abort();  // the blocked thread cannot be joined
    }
    return result.get();
  };
  for (const std::string name : {"config.json", "model.safetensors"}) {
    SCOPED_TRACE(name);
    fifoInstead(name);
    const auto r = runWithin({"generate", "--model", dir, "--prompt", "Hi", "--tokens", "2"});
    EXPECT_NE(r.status, 0);
    EXPECT_NE(r.err.find(name), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("FIFO"), std::string::npos) << r.err;
    restore(name);
  }
  const std::string data = (tmp / "data.txt").string();
  ASSERT_EQ(::mkfifo(data.c_str(), 0600), 0);
  const auto r = runWithin({"train-step", "--preset", "tiny", "--data", data, "--batch", "1", "--seq", "8"});
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("data.txt"), std::string::npos) << r.err;
}

TEST(Gpt2Cli, UsageErrorsExitNonZero) {
  EXPECT_NE(run({}).status, 0);
  EXPECT_NE(run({"frobnicate"}).status, 0);
  EXPECT_NE(run({"generate", "--tokens", "3"}).status, 0);  // --prompt is required
  EXPECT_NE(run({"generate", "--preset", "3B", "--prompt", "x"}).status, 0);
  auto missing = run({"generate", "--model", "/nonexistent/gpt2", "--prompt", "x"});
  EXPECT_EQ(missing.status, 1);
  EXPECT_NE(missing.err.find("/nonexistent/gpt2"), std::string::npos) << missing.err;
}

}  // namespace
}  // namespace gpt2
