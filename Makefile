# The two commands (see README.md):
#   make run    build everything (release) and run the tool's main job: devarray info, devarray bench --quick
#   make test   build with AddressSanitizer + UndefinedBehaviorSanitizer and run every test,
#               then the ThreadSanitizer target
# Both install missing Debian packages first (scripts/setup; apt-get as root).
# Output is kept short: CMake's configure output goes nowhere but errors, each
# build says in one line what it compiled (its full log is DIR/build.log), and
# the tests print failures, skips and totals (all of it in build-asan/ctest-output.txt).
# A second `make test` rebuilds nothing that did not change.
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE ?= cmake
PREFIX ?= /usr/local
CONFIGURE = $(CMAKE) --log-level=ERROR -S .
BUILD = scripts/build

.PHONY: all run test tsan fuzz bench install docs format clean setup

all: build-rel/devarray

setup:
	@scripts/setup

build-rel/devarray: setup
	@$(CONFIGURE) -B build-rel -DCMAKE_BUILD_TYPE=Release -DDV_BUILD_TESTS=OFF > /dev/null
	@$(BUILD) build-rel -j$(JOBS)

run: build-rel/devarray
	./build-rel/devarray info
	./build-rel/devarray bench --quick

test: setup
	@$(CONFIGURE) -B build-asan -DCMAKE_BUILD_TYPE=Debug -DDV_SANITIZE=ON -DDV_WERROR=ON > /dev/null
	@$(BUILD) build-asan -j$(JOBS)
	@$(MAKE) --no-print-directory tsan
	@$(MAKE) --no-print-directory fuzz
	@echo "ctest (ASan+UBSan) in build-asan:"
	@ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  scripts/run-tests build-asan -j$(JOBS) --output-on-failure --timeout 600

# ThreadSanitizer: the suites that share contexts and streams between threads
# (not test_watchdog: ThreadSanitizer delays an asynchronous signal to the thread's next
# intercepted call and files a fiber's signal handler under another thread, so the
# watchdog's signal-driven stop of a spinning kernel hangs or is reported as a race under
# it; at b9b4419, before this change, 3 runs here gave a report, a hang and a pass. The
# suite runs under ASan+UBSan in ctest, `watchdog`)
# (and the host simulator's kernels: fibers, helper threads, streams at once, and
# a soak of 4e4 launches;
# the copy team's workers and concurrent callers).
TSAN = TSAN_OPTIONS="halt_on_error=1 suppressions=$(CURDIR)/tests/tsan.supp" scripts/quietly build-tsan/tsan.log
# The CUDA backend's threads (staging threads and, without stream memory operations,
# staging callbacks; the copy team; streams shared between threads) on the driver test
# double, as CTest's cuda.backend runs it.
CUDA_DOUBLE = LD_LIBRARY_PATH=build-tsan/tests/cudadouble DV_CUDA_STAGING_CHUNK=65536 CUDA_DOUBLE_BLOCK_S=3
tsan: setup
	@$(CONFIGURE) -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDV_TSAN=ON -DDV_WERROR=ON > /dev/null
	@$(BUILD) build-tsan -j$(JOBS) --target test_threads test_streams test_memory test_pool test_host_kernels test_host_fast test_modes test_kwave test_smart test_claim test_copyteam test_cuda_double test_cuda_stager test_soak test_host_checks test_host_race test_graph test_sync_launch
	@rm -f build-tsan/tsan.log
	@$(TSAN) ./build-tsan/tests/test_threads host
	@$(TSAN) ./build-tsan/tests/test_threads host-pool
	@$(TSAN) env DV_MODEL_OPS=20000 ./build-tsan/tests/test_pool host
	@$(TSAN) ./build-tsan/tests/test_streams host
	@$(TSAN) ./build-tsan/tests/test_memory host
	@$(TSAN) ./build-tsan/tests/test_host_kernels host
	@$(TSAN) ./build-tsan/tests/test_host_fast host
	@$(TSAN) ./build-tsan/tests/test_host_checks host
	@$(TSAN) ./build-tsan/tests/test_host_race
	@$(TSAN) ./build-tsan/tests/test_modes host
	@$(TSAN) ./build-tsan/tests/test_kwave host
	@$(TSAN) ./build-tsan/tests/test_soak host
	@$(TSAN) ./build-tsan/tests/test_smart host
	@$(TSAN) ./build-tsan/tests/test_claim host
	@$(TSAN) ./build-tsan/tests/test_claim host-pool
	@$(TSAN) ./build-tsan/tests/test_copyteam
	@$(TSAN) ./build-tsan/tests/test_graph host
	@$(TSAN) ./build-tsan/tests/test_sync_launch host
	@$(TSAN) env $(CUDA_DOUBLE) ./build-tsan/tests/test_cuda_double cuda
	@$(TSAN) env $(CUDA_DOUBLE) ./build-tsan/tests/test_streams cuda
	@$(TSAN) env $(CUDA_DOUBLE) ./build-tsan/tests/test_threads cuda
	@$(TSAN) env $(CUDA_DOUBLE) ./build-tsan/tests/test_claim cuda
	@$(TSAN) env $(CUDA_DOUBLE) ./build-tsan/tests/test_cuda_stager cuda
	@$(TSAN) env $(CUDA_DOUBLE) ./build-tsan/tests/test_graph cuda
	@$(TSAN) env $(CUDA_DOUBLE) CUDA_DOUBLE_MEMOPS=0 ./build-tsan/tests/test_cuda_double cuda

# libFuzzer (clang): views, slicing, reshape, ravel, split on arbitrary layouts, and DLPack
# import of arbitrary tensors; short runs.
FUZZ_RUNS ?= 200000
FUZZ_DLPACK_RUNS ?= 300000
fuzz: setup
	@$(CONFIGURE) -B build-fuzz -DCMAKE_C_COMPILER=clang -DDV_FUZZ=ON -DDV_BUILD_TESTS=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo > /dev/null
	@$(BUILD) build-fuzz -j$(JOBS) --target fuzz_views fuzz_dlpack
	@cd build-fuzz && ./fuzz/fuzz_views -runs=$(FUZZ_RUNS) -max_len=128 -seed=1 > fuzz.log 2>&1 || { tail -30 fuzz.log; exit 1; }
	@echo "fuzz_views: $$(tail -1 build-fuzz/fuzz.log)"
	@cd build-fuzz && ./fuzz/fuzz_dlpack -runs=$(FUZZ_DLPACK_RUNS) -max_len=512 -seed=1 > fuzz_dlpack.log 2>&1 || { tail -30 fuzz_dlpack.log; exit 1; }
	@echo "fuzz_dlpack: $$(tail -1 build-fuzz/fuzz_dlpack.log)"

bench: build-rel/devarray
	./build-rel/devarray bench

# The API reference (Doxygen, from include/devarray.h): build-rel/docs/html/index.html.
docs: setup
	@$(CONFIGURE) -B build-rel -DCMAKE_BUILD_TYPE=Release -DDV_BUILD_TESTS=OFF > /dev/null
	@$(BUILD) build-rel --target docs
	@echo "API reference: build-rel/docs/html/index.html"

# The prefix is given at configure time too, so that the libdir is the GNU
# one for it (lib/<multiarch> under /usr, lib elsewhere).
install: setup
	@$(CONFIGURE) -B build-rel -DCMAKE_BUILD_TYPE=Release -DDV_BUILD_TESTS=OFF -DCMAKE_INSTALL_PREFIX=$(PREFIX) > /dev/null
	@$(BUILD) build-rel -j$(JOBS)
	$(CMAKE) --install build-rel

format:
	clang-format -i include/*.h include/devarray/*.h $$(find src tests -name '*.[ch]') tools/*/*.c examples/*.c bench/*.c

clean:
	rm -rf build build-rel build-asan build-tsan build-fuzz
