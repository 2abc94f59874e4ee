# The front door.  `make test` and `make run` install the Debian packages the
# project needs (as root; otherwise they print the apt-get command), configure,
# build, and then test or run.
BUILD      ?= build
ASAN_BUILD ?= build-asan
TSAN_BUILD ?= build-tsan
MESON_OPTS ?=
# Warnings are errors in every build the Makefile configures (developers,
# CI); meson's own default leaves them warnings for users' builds.
DEV_OPTS   := -Dwerror=true
DEBS       := gcc clang pkg-config meson ninja-build libucx-dev openmpi-bin \
              libopenmpi-dev libibverbs-dev ibverbs-providers \
              libopenblas-dev libcjson-dev libpcre2-dev gnuplot-nox \
              python3-numpy python3-torch libtorch-dev g++ python3-dev \
              pybind11-dev iproute2
# The real-verbs lane boots Debian's kernel in qemu (tests/roce-vm).
VM_DEBS    := qemu-system-x86 kmod cpio iproute2
ROCE_VM_CACHE ?= /var/cache/braid-roce-vm
RUN_RANKS  ?= 4

.PHONY: all deps build test run test-asan test-tsan fuzz soak test-roce-vm install clean \
        test-builds

all: build

deps:
	@missing=""; for p in $(DEBS); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" \
	    || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "installing:$$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
	      apt-get install -y -qq --no-install-recommends $$missing; \
	  else \
	    echo "missing packages:$$missing"; \
	    echo "run: sudo apt-get install -y$$missing"; exit 1; \
	  fi; \
	fi

$(BUILD)/build.ninja:
	meson setup $(BUILD) $(DEV_OPTS) $(MESON_OPTS)

build: deps $(BUILD)/build.ninja
	ninja -C $(BUILD)

# Prints "N passed, N failed" last, the line CI reads.  The tests' link
# calibrations (docs/tuning.md) are cached in the build, not in ~/.cache.
test: build
	@BRAID_CALIB_DIR=$(abspath $(BUILD))/calib-cache \
	  .ci/meson-test.sh $(BUILD) --no-suite fault --no-suite roce-vm

test-asan: deps
	@[ -f $(ASAN_BUILD)/build.ninja ] || \
	  meson setup $(ASAN_BUILD) $(DEV_OPTS) -Dtorch=disabled -Db_sanitize=address,undefined -Db_lundef=false
	ninja -C $(ASAN_BUILD)
	@BRAID_CALIB_DIR=$(abspath $(ASAN_BUILD))/calib-cache \
	  .ci/meson-test.sh $(ASAN_BUILD) --suite unit --suite mp-quick

# The same suites under ThreadSanitizer.  meson.build's 'tsan' test setup
# (the default in this build) passes TSAN_OPTIONS with tests/tsan.supp to
# every test and every process it starts.  TSan makes the threaded unit
# tests 5-10x slower, and on 2 busy cores lowhop_algos has come within a few
# percent of three times its limit, hence five times the limits.
test-tsan: deps
	@[ -f $(TSAN_BUILD)/build.ninja ] || \
	  meson setup $(TSAN_BUILD) $(DEV_OPTS) -Dtorch=disabled -Db_sanitize=thread -Db_lundef=false
	ninja -C $(TSAN_BUILD)
	@BRAID_CALIB_DIR=$(abspath $(TSAN_BUILD))/calib-cache \
	  .ci/meson-test.sh $(TSAN_BUILD) --suite unit --suite mp-quick \
	  --timeout-multiplier 5

# Plugins and reasons, then the benchmark with every plugin (the algo column
# is the dispatcher's choice per size), then with the fallback alone: the
# UCX transport and the point-to-point (ring, recursive doubling) algorithms.
run: build
	$(BUILD)/tools/braid-info
	$(BUILD)/tools/braidrun -n $(RUN_RANKS) $(BUILD)/bench/braid-bench -b 8 -e 64M -f 4
	BRAID_PLUGINS=ucx,p2p $(BUILD)/tools/braidrun -n $(RUN_RANKS) $(BUILD)/bench/braid-bench -b 8 -e 64M -f 4

install: build
	meson install -C $(BUILD)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD) $(BUILDS_DIR)

# The builds users make: release with gcc, debug with clang, both -Werror
# (configure and compile only; one "test" each in the summary line).
BUILDS_DIR ?= build-variants
test-builds: deps
	@pass=0; fail=0; \
	for v in "gcc release" "clang debug"; do \
	  set -- $$v; d=$(BUILDS_DIR)/$$1-$$2; mkdir -p $(BUILDS_DIR); \
	  if { [ -f $$d/build.ninja ] || CC=$$1 CXX=$$( [ $$1 = clang ] && echo clang++ || echo g++ ) \
	         meson setup $$d $(DEV_OPTS) --buildtype=$$2 >$$d.log 2>&1; } && \
	     ninja -C $$d >>$$d.log 2>&1; then \
	    echo "ok: $$1 $$2 build"; pass=$$((pass + 1)); \
	  else \
	    echo "FAIL: $$1 $$2 build (log: $$d.log)"; tail -n 20 $$d.log; fail=$$((fail + 1)); \
	  fi; \
	done; \
	echo "$$pass passed, $$fail failed"; [ $$fail -eq 0 ]

# libFuzzer smoke runs of every parser of user input (clang).
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 20
fuzz: deps
	@command -v clang >/dev/null || { [ "$$(id -u)" = 0 ] && apt-get install -y -qq clang; }
	@[ -f $(FUZZ_BUILD)/build.ninja ] || CC=clang meson setup $(FUZZ_BUILD) \
	  $(DEV_OPTS) -Dtorch=disabled -Dfuzz=true -Dfuzz_seconds=$(FUZZ_SECONDS) -Db_sanitize=address,undefined -Db_lundef=false
	ninja -C $(FUZZ_BUILD) tests/fuzz/fuzz_algo tests/fuzz/fuzz_plugins \
	  tests/fuzz/fuzz_topo tests/fuzz/fuzz_tune \
	  $$(ninja -C $(FUZZ_BUILD) -t targets all | sed -n 's|^\(tests/engine/fuzz_[a-z]*\): .*|\1|p')
	@.ci/meson-test.sh $(FUZZ_BUILD) --no-rebuild --suite fuzz

# A long soak: 20000 random collectives on 4 ranks, every result checked and
# heap/segments/descriptors flat (the short one runs in `make test`).
soak: build
	@$(BUILD)/tools/braidrun -n 4 $(BUILD)/tests/soak/soak --iters 20000 --seed $$(date +%s) \
	  && echo "1 passed, 0 failed" || { echo "0 passed, 1 failed"; exit 1; }

# oneshot/twoshot over real verbs (Soft-RoCE) inside a VM; skips with the
# reason where no VM can start.  The kernel image is cached in ROCE_VM_CACHE.
test-roce-vm: build
	@missing=""; for p in $(VM_DEBS); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" \
	    || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ] && [ "$$(id -u)" = 0 ]; then \
	  apt-get install -y -qq --no-install-recommends $$missing || true; fi
	@BRAID_ROCE_VM_CACHE=$(ROCE_VM_CACHE) .ci/meson-test.sh $(BUILD) --no-rebuild --suite roce-vm
