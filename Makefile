# fp4forge: every target installs missing Debian packages first (scripts/install-deps.sh).
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=Release -DFP4FORGE_WERROR=ON

.PHONY: all deps build demo test test-unit bench bench-e2e fuzz test-asan clean

all: build

deps:
	@bash scripts/install-deps.sh

$(BUILD)/CMakeCache.txt: | deps
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS)

build: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

# The demo builds only what it runs: the binary and the canned seat its gateway stages talk to.
demo: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS) --target fp4forge_cli fp4forge_fake_seat
	bash scripts/demo.sh $(BUILD)/bin/fp4forge

# The whole suite, then every fuzz target for FUZZ_SMOKE_SECONDS (clang + libFuzzer + ASan/UBSan build in
# build-fuzz; FUZZ_SMOKE_SECONDS=0 skips the smoke run).
FUZZ_SMOKE_SECONDS ?= 20

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 900
	@if [ "$(FUZZ_SMOKE_SECONDS)" != "0" ]; then $(MAKE) --no-print-directory fuzz FP4FORGE_FUZZ_SECONDS=$(FUZZ_SMOKE_SECONDS); fi

test-unit: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) -L unit

bench: build
	bash scripts/bench.sh $(BUILD)

bench-e2e: build
	bash scripts/bench-e2e.sh $(BUILD)

fuzz:
	@FP4FORGE_WITH_FUZZ=1 bash scripts/install-deps.sh
	FP4FORGE_FUZZ_SECONDS=$(or $(FP4FORGE_FUZZ_SECONDS),30) bash scripts/fuzz.sh

test-asan: deps
	cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFP4FORGE_SANITIZE=address,undefined \
	  -DFP4FORGE_BUILD_BENCH=OFF
	cmake --build build-asan -j $(JOBS)
	cd build-asan && ctest --output-on-failure -j $(JOBS) -L 'unit|e2e|golden|fault' --timeout 1800

clean:
	rm -rf $(BUILD) build-asan build-fuzz
