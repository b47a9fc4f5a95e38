# seedfs top-level Makefile: drives CMake.
#   make          build build/seedfs
#   make test     install missing Debian packages, build, run every test
#                 (normal build, an ASan+UBSan build, and the unit tests
#                 and a concurrency stress in a ThreadSanitizer build)
#   make test-full  make test, then the long forms of the churn tests and
#                 the VM tier, the slow tests under ASan+UBSan and every
#                 integration test under ThreadSanitizer, and the CUDA
#                 build with its MOCK driver under each (CI runs it)
#   make demo     install, build, publish a generated model, mount it
#   make test-rdma  the soft-RoCE VM tier alone: raw verbs and libfabric
#                 verbs on a real kernel RDMA stack (qemu, TCG)
#   make bench    throughput table (BENCH_SIZE=1G by default)
#   make bench-fanout  one seed, 8 replicas in network namespaces on
#                 shaped links: seed only, re-seeding, the limit, a killed
#                 seed (FANOUT_N, FANOUT_SIZE, FANOUT_RATE)
#   make profile  where the mount daemon's CPU goes on a cold read
#                 (perf; PROFILE_SIZE, PROFILE_PROTOCOL)
#   make chaos    a seed and 7 re-seeding replicas in network namespaces
#                 reading in a loop while faults are injected (kills,
#                 SIGSTOP, link cuts, republishes, remounts) for CHAOS_S
#                 seconds (600): wrong bytes, crashes, hangs, late EIO
#                 fail it; make test runs it for 60 s with 4 hosts
#   make sim      the swarm simulated at fleet scale (sim/): the cache's
#                 own policy over modelled links, N = 8 to 1000 replicas
#                 of a 140 GB model (SIM_CHUNKS, SIM_NS); make test runs
#                 its small case against bench-fanout's real run
#   make fuzz     the parsers' mutation fuzzing, long (FUZZ_ITERS per
#                 target, default 1000000), in the ASan+UBSan build;
#                 make test runs it short
#   make deb      Debian packages (seedfs, libseedfs0, libseedfs-dev,
#                 python3-seedfs) into build/deb, checked by lintian
#   make mutants  every load-bearing check broken on purpose
#                 (tests/mutants/mutants.txt), each in a copy of the tree
#                 built in build-mut: the test named beside it must fail
#                 (MUTANTS=id,id runs those only); make test checks that
#                 each still applies
#   make format   clang-format every C file in place

BUILD   ?= build
ASAN    ?= build-asan
TSAN    ?= build-tsan
JOBS    ?= $(shell nproc)
CTEST_FLAGS ?= --output-on-failure
# make test's passes run two tests at a time: those marked RUN_SERIAL
# alone, the rest (tests/CMakeLists.txt: SIDE_BY_SIDE, the unit tests)
# two side by side.  TEST_LANES=1 runs every test alone.
TEST_LANES ?= 2

.PHONY: all deps test test-full test-fast test-rdma demo bench bench-fanout profile chaos sim fuzz mutants format check-format clean deb
FUZZ_ITERS ?= 1000000
RDMA_PROTOCOLS ?= rdma rdma-fabric

all:
	@packaging/deps.sh --build-only
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

deps:
	@packaging/deps.sh

# Tests run two at a time (TEST_LANES): integration tests mount real FUSE
# filesystems and start real seeds, and 2 cores are what CI has; most of
# them wait, and those whose bounds a neighbour could move run alone
# (RUN_SERIAL).  Each pass writes a JUnit
# file; tests/summary.sh prints what ran, failed and was skipped (and
# why), per pass, at the end.  docs/testing.md says which test runs in
# which pass.
# The CUDA, ASan and TSan trees build in the background, on cores no test
# wants, while the normal pass runs (tests/bgbuild.sh); their foreground
# builds (tests/build.sh, cuda_build.sh) wait for those.
# A pass that fails ends make test with its summary: the failed tests and
# the lines that say why, last in the log (CI shows a log's end).
failed = { tests/summary.sh $(1); exit 1; }

test: deps check-format
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)
	@SFS_BG_OWNER=$$PPID tests/bgbuild.sh $(JOBS) $(BUILD) $(ASAN) $(TSAN)
	(cd $(BUILD) && ctest $(CTEST_FLAGS) -j $(TEST_LANES) -LE '^long$$' --test-output-size-passed 1048576 \
		--output-junit ctest-normal.xml) || $(call failed,normal=$(BUILD)/ctest-normal.xml)
	@tests/claims_bounds.py --absent-ok docs/claims.md $(BUILD)/ctest-normal.xml
	@tests/build.sh $(ASAN) $(JOBS) -DCMAKE_BUILD_TYPE=Debug -DSEEDFS_SANITIZE=ON
	(cd $(ASAN) && ctest $(CTEST_FLAGS) -j $(TEST_LANES) -L '^asan$$' --output-junit ctest-asan.xml) \
		|| $(call failed,asan=$(ASAN)/ctest-asan.xml)
	@tests/build.sh $(TSAN) $(JOBS) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSEEDFS_TSAN=ON
	(cd $(TSAN) && ctest $(CTEST_FLAGS) -j $(TEST_LANES) -L '^tsan$$' --output-junit ctest-tsan.xml) \
		|| $(call failed,tsan=$(TSAN)/ctest-tsan.xml)
	@tests/summary.sh normal=$(BUILD)/ctest-normal.xml asan=$(ASAN)/ctest-asan.xml \
		tsan=$(TSAN)/ctest-tsan.xml

# make test, then what does not fit its 20 minutes: the slow tests under
# ASan+UBSan, and every integration test under ThreadSanitizer.  CI
# (.ci/run) runs this.
test-full: test
	(cd $(BUILD) && ctest $(CTEST_FLAGS) -L '^long$$' --test-output-size-passed 1048576 \
		--output-junit ctest-long.xml) || $(call failed,long=$(BUILD)/ctest-long.xml)
	@tests/claims_bounds.py docs/claims.md $(BUILD)/ctest-normal.xml $(BUILD)/ctest-long.xml
	(cd $(ASAN) && ctest $(CTEST_FLAGS) -L '^asan-full$$' --output-junit ctest-asan-full.xml) \
		|| $(call failed,asan-full=$(ASAN)/ctest-asan-full.xml)
	(cd $(TSAN) && ctest $(CTEST_FLAGS) -L '^tsan-full$$' --output-junit ctest-tsan-full.xml) \
		|| $(call failed,tsan-full=$(TSAN)/ctest-tsan-full.xml)
	@tests/summary.sh normal=$(BUILD)/ctest-normal.xml asan=$(ASAN)/ctest-asan.xml \
		tsan=$(TSAN)/ctest-tsan.xml long=$(BUILD)/ctest-long.xml \
		asan-full=$(ASAN)/ctest-asan-full.xml tsan-full=$(TSAN)/ctest-tsan-full.xml

test-fast: all
	cd $(BUILD) && ctest $(CTEST_FLAGS)

test-rdma: deps all
	tests/vm/run.sh $(BUILD) tests/vm/guest-rdma.sh $(RDMA_PROTOCOLS)

demo: all
	@tests/demo.sh $(BUILD)

deb: deps
	@packaging/deb.sh $(BUILD)/deb

# (Under the tree's lock, as make test's builds of it: tests/build.sh.)
fuzz: deps
	@mkdir -p $(ASAN) && flock $(ASAN).lock sh -c \
		'cmake -S . -B $(ASAN) -DCMAKE_BUILD_TYPE=Debug -DSEEDFS_SANITIZE=ON >/dev/null && \
		 cmake --build $(ASAN) -j $(JOBS) --target test_fuzz'
	SEEDFS_FUZZ_ITERS=$(FUZZ_ITERS) $(ASAN)/tests/test_fuzz

bench: all
	@packaging/deps.sh
	@packaging/deps.sh --bench
	@bench/run.sh $(BUILD)
	@bench/loaders.sh $(BUILD)

bench-fanout: all
	@packaging/deps.sh
	@packaging/deps.sh --bench
	@bench/fanout.sh $(BUILD)

profile: all
	@packaging/deps.sh --bench
	@bench/profile.sh $(BUILD)

chaos: all
	@packaging/deps.sh
	@bash bench/chaos.sh $(BUILD)

sim: all
	@bash sim/run.sh $(BUILD)/sim/seedfs-sim

mutants: all
	@python3 tests/mutants/run.py . build-mut $(if $(MUTANTS),--only $(MUTANTS))

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
	rm -rf $(BUILD) $(ASAN) $(TSAN) build-mut
