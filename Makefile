# seedfs top-level Makefile: drives CMake.
#   make          build build/seedfs
#   make test     install missing Debian packages, build, run every test
#                 (normal build, an ASan+UBSan build, and the unit tests
#                 and a concurrency stress in a ThreadSanitizer build)
#   make demo     install, build, publish a generated model, mount it
#   make test-rdma  the soft-RoCE VM tier alone: raw verbs and libfabric
#                 verbs on a real kernel RDMA stack (qemu, TCG)
#   make bench    throughput table (BENCH_SIZE=1G by default)
#   make bench-fanout  one seed, 8 replicas in network namespaces on
#                 shaped links: seed only, re-seeding, the limit, a killed
#                 seed (FANOUT_N, FANOUT_SIZE, FANOUT_RATE)
#   make fuzz     the parsers' mutation fuzzing, long (FUZZ_ITERS per
#                 target, default 1000000), in the ASan+UBSan build;
#                 make test runs it short
#   make deb      Debian packages (seedfs, libseedfs0, libseedfs-dev,
#                 python3-seedfs) into build/deb, checked by lintian
#   make format   clang-format every C file in place

BUILD   ?= build
ASAN    ?= build-asan
TSAN    ?= build-tsan
JOBS    ?= $(shell nproc)
CTEST_FLAGS ?= --output-on-failure

.PHONY: all deps test test-fast test-rdma demo bench bench-fanout fuzz format check-format clean deb
FUZZ_ITERS ?= 1000000
RDMA_PROTOCOLS ?= rdma rdma-fabric

all:
	@packaging/deps.sh --build-only
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

deps:
	@packaging/deps.sh

# Tests run serially: integration tests mount real FUSE filesystems and
# start real seeds, and 2 cores are what CI has.
test: deps check-format
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)
	cd $(BUILD) && ctest $(CTEST_FLAGS)
	@cmake -S . -B $(ASAN) -DCMAKE_BUILD_TYPE=Debug -DSEEDFS_SANITIZE=ON >/dev/null
	@cmake --build $(ASAN) -j $(JOBS)
	cd $(ASAN) && ctest $(CTEST_FLAGS) -L asan
	@cmake -S . -B $(TSAN) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSEEDFS_TSAN=ON >/dev/null
	@cmake --build $(TSAN) -j $(JOBS)
	cd $(TSAN) && ctest $(CTEST_FLAGS) -L tsan

test-fast: all
	cd $(BUILD) && ctest $(CTEST_FLAGS)

test-rdma: deps all
	tests/vm/run.sh $(BUILD) tests/vm/guest-rdma.sh $(RDMA_PROTOCOLS)

demo: all
	@tests/demo.sh $(BUILD)

deb: deps
	@packaging/deb.sh $(BUILD)/deb

fuzz: deps
	@cmake -S . -B $(ASAN) -DCMAKE_BUILD_TYPE=Debug -DSEEDFS_SANITIZE=ON >/dev/null
	@cmake --build $(ASAN) -j $(JOBS) --target test_fuzz
	SEEDFS_FUZZ_ITERS=$(FUZZ_ITERS) $(ASAN)/tests/test_fuzz

bench: all
	@packaging/deps.sh --bench
	@bench/run.sh $(BUILD)

bench-fanout: all
	@packaging/deps.sh
	@packaging/deps.sh --bench
	@bench/fanout.sh $(BUILD)

FORMAT_FILES = $(shell git ls-files '*.c' '*.h' 2>/dev/null)

format:
	@clang-format -i $(FORMAT_FILES)

check-format:
	@if command -v clang-format >/dev/null; then \
		out=$$(clang-format --dry-run $(FORMAT_FILES) 2>&1); \
		if [ -n "$$out" ]; then echo "$$out" | head -20; \
			echo "clang-format: run 'make format'"; exit 1; fi; \
	else echo "clang-format not installed: format check skipped"; fi

clean:
	rm -rf $(BUILD) $(ASAN) $(TSAN)
