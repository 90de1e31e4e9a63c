# llmfs — one Makefile, no recursion (see ../shared/STYLE.md, section 9).
#
#   make              build everything this machine can build
#   make check        install missing Debian packages, build, run every test
#   make SANITIZE=1 check   the same with ASan + UBSan (in build/san/)
#   make demo [MODEL=file.gguf]   mount a model, generate, unmount
#   make fuzz         run the fuzz targets (GGUF, config, placement)
#   make stress [SECONDS=N]   the randomized operation test for N seconds
#   make bench        speed figures against llama.cpp, measured in one run
#   make install [PREFIX=/usr/local] [DESTDIR=]   and make uninstall
#   make deb          build/llmfs_$(VERSION)_ARCH.deb (Documentation/install.md)
#   make format       apply .clang-format to every tracked C file
#   make format-check the same as a check (CI): lists what would change
#   make V=1          show the commands

# The one version: llmfs --version and the Debian package.
VERSION = 0.1.0

PKGS_DEB = build-essential pkg-config libfuse3-dev fuse3 liburing-dev \
	   libnuma-dev check libpcre2-dev libjansson-dev nettle-dev python3 \
	   libcurl4-openssl-dev openssl
IO_PKGS = liburing numa
# jansson: JSON schemas for constrained output (engine/grammar/schema.c) and
# chat templates' tojson (engine/template/); nettle: the checksums of KV
# snapshots (engine/snapshot.c)
ENGINE_PKGS = libpcre2-8 jansson nettle
# libcurl and jansson: remote models (fs/remote*.c)
FS_PKGS = fuse3 nettle libcurl jansson
TEST_PKGS = check jansson
# libsystemd: sd_notify for llmfs@.service (Type=notify); dpkg-dev: make deb;
# systemd: systemd-analyze verify in tests/install/install.sh.
PKGS_DEB += libsystemd-dev dpkg-dev systemd
# clang-format: make format-check (Debian 12's is version 14; another
# version may format some lines differently).
PKGS_DEB += clang-format
# What make check needs besides: podman (with runc: crun refuses this
# machine's hybrid cgroups) builds the Containerfile and mounts in a
# container (tests/install/podman.sh); systemd-container and debootstrap
# boot systemd in a Debian tree to run llmfs@.service (nspawn.sh).
# Documentation/containers.md and install.md say why each is needed.
PKGS_DEB_CHECK = podman runc systemd-container debootstrap
# python3-jsonschema: tests/fs/grammar.sh validates answers under a JSON
# schema with a validator of its own.
PKGS_DEB += python3-jsonschema
# And what the other tests run: cmake and libssl-dev build llama-server
# with TLS from the pinned source (tests/fs/remote.sh), util-linux has
# setpriv, unshare and script(1), procps has pgrep, man-db renders the man
# pages, valgrind checks the daemon for leaks (tests/fs/lifecycle.sh), git
# and coreutils' timeout drive tests/run (Documentation/testing.md).
PKGS_DEB_CHECK += cmake libssl-dev util-linux procps man-db valgrind git \
	coreutils
# npm installs the reference (make ref); only when npm is missing, so that a
# Node.js from elsewhere (node-llama-cpp 3.22.1 wants Node >= 20, Debian 12
# has 18) is not replaced by Debian's.
NPM_DEB = $(if $(shell command -v npm),,nodejs npm)
# The aarch64 cross build and its tests under qemu-user (make aarch64,
# tests/engine/aarch64.sh): Debian's cross compiler, qemu-aarch64, and the
# arm64 builds of the libraries the engine and its tests link, installed
# beside the native ones (multiarch: deps adds the arm64 architecture).
CROSS_DEB_ARCH = arm64
PKGS_DEB_CHECK += gcc-aarch64-linux-gnu qemu-user libc6-dev:arm64 \
	liburing-dev:arm64 libnuma-dev:arm64 libpcre2-dev:arm64 check:arm64 \
	libjansson-dev:arm64 nettle-dev:arm64
FS_PKGS += libsystemd

CC ?= cc
CFLAGS ?= -O2 -g
# x86-64-v3 (AVX2, FMA, F16C) lets the compiler vectorize the scalar
# reference kernels; -std=c11 keeps -ffp-contract=off, so no float result
# changes. Not -march=native: on an AVX-512 VNNI machine GCC 12.2 turns the
# plain Q4_0 block sum into an AVX-512 VNNI instruction of the wrong
# signedness (see Documentation/quantization.md). The SIMD kernels
# (engine/cpu/*_avx512.c, *_avx2.c, *_neon_dotprod.c) carry their own
# target attributes and are picked at run time (engine/cpu/isa.c), not by
# these flags, so one binary runs on any x86-64-v3 machine. On aarch64
# (native, or make aarch64's cross build) the baseline ARMv8-A has NEON.
TARGET_ARCH_NAME := $(firstword $(subst -, ,$(shell $(CC) -dumpmachine 2>/dev/null)))
ARCH_FLAGS ?= $(if $(filter x86_64,$(TARGET_ARCH_NAME)),-march=x86-64-v3 -mtune=native)
override CFLAGS += $(ARCH_FLAGS) -std=c11 -D_GNU_SOURCE -Wall -Wextra -Wshadow \
	-Wno-unused-parameter -fno-strict-aliasing -pthread -MMD -MP \
	-DLLMFS_VERSION='"$(VERSION)"'
LDLIBS += -lm -pthread -ldl

BUILD ?= build
ifeq ($(SANITIZE),1)
BUILD := build/san
override CFLAGS += -fsanitize=address,undefined -fno-omit-frame-pointer \
	-fno-sanitize-recover=undefined
override LDFLAGS += -fsanitize=address,undefined
endif

ifeq ($(V),1)
Q =
else
Q = @
endif

pkg_cflags = $(shell pkg-config --cflags $(1) 2>/dev/null)
pkg_libs = $(shell pkg-config --libs $(1) 2>/dev/null)
have_fuse := $(shell pkg-config --exists fuse3 && echo 1)

override CFLAGS += $(call pkg_cflags,$(IO_PKGS) $(ENGINE_PKGS))

IO_SRC := $(wildcard io/*.c)
ENGINE_SRC := $(wildcard engine/*.c engine/cpu/*.c engine/ref/*.c engine/quant/*.c \
	engine/tokenizer/*.c engine/grammar/*.c engine/template/*.c \
	engine/cuda/*.c)
# Each architecture's kernels build only for it: *_neon*.c on aarch64.
ifneq ($(TARGET_ARCH_NAME),aarch64)
ENGINE_SRC := $(filter-out $(wildcard engine/cpu/*_neon*.c),$(ENGINE_SRC))
endif
FS_SRC := $(wildcard fs/*.c fs/local/*.c fs/remote/*.c)
IO_OBJ := $(IO_SRC:%.c=$(BUILD)/%.o)
ENGINE_OBJ := $(ENGINE_SRC:%.c=$(BUILD)/%.o)
FS_OBJ := $(FS_SRC:%.c=$(BUILD)/%.o)

IO_LIB := $(BUILD)/libllmfs-io.a
ENGINE_LIB := $(BUILD)/libllmfs-engine.a
FS_LIB := $(BUILD)/libllmfs-fs.a

IO_LIBS = $(IO_LIB) $(call pkg_libs,$(IO_PKGS))
ENGINE_LIBS = $(ENGINE_LIB) $(IO_LIB) $(call pkg_libs,$(IO_PKGS) $(ENGINE_PKGS))
FS_LIBS = $(FS_LIB) $(ENGINE_LIB) $(IO_LIB) \
	$(call pkg_libs,$(FS_PKGS) $(IO_PKGS) $(ENGINE_PKGS))

# tools/llmfs.c is the mount command and needs libfuse3; every other tool
# links the engine alone (so they build where FUSE is absent).
TOOL_SRC := $(wildcard tools/*.c)
FS_TOOLS := $(patsubst tools/%.c,$(BUILD)/bin/%,$(wildcard tools/llmfs.c))
ENGINE_TOOLS := $(filter-out $(FS_TOOLS),$(TOOL_SRC:tools/%.c=$(BUILD)/bin/%))
TOOLS := $(ENGINE_TOOLS)
ifeq ($(have_fuse),1)
TOOLS += $(FS_TOOLS)
endif

# The CUDA parts build wherever nvcc is (CI has it, without a GPU); CUDA=0
# leaves them out. They are one module, build/lib/llmfs-cuda.so, that the
# engine dlopen()s at run time (engine/cuda/loader.c): nothing else links
# a CUDA library, so the same binaries run where CUDA is absent. The
# module links the CUDA runtime statically (nvcc's default) and needs
# only the driver's libcuda.so.1; it loads cuBLAS itself.
NVCC ?= $(shell command -v nvcc 2>/dev/null || \
	{ [ -x /usr/local/cuda/bin/nvcc ] && echo /usr/local/cuda/bin/nvcc; })
CUDA ?= $(if $(NVCC),1,0)
CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(NVCC))
# Ampere (A100, RTX 30xx), Ada (RTX 40xx), Hopper (H100/H200), and PTX for
# newer cards. sm_80, sm_86 and sm_89 take their machine code from one
# compute_80 PTX: the sources test no architecture between 800 and 900,
# so their PTX would be the same, and cicc, about half of nvcc's time on
# attention.cu and mmv.cu, runs twice instead of four times (Documentation/
# testing.md). nvcc runs one cicc for the three -gencode entries of
# compute_80, and (--threads, below) schedules their ptxas passes each on
# its own, where code=[sm_80,sm_86,sm_89] would chain the three in one.
# While working on kernels, NVCC_ARCH='-arch=sm_90' builds one.
NVCC_ARCH ?= -gencode arch=compute_80,code=sm_80 \
	-gencode arch=compute_80,code=sm_86 \
	-gencode arch=compute_80,code=sm_89 \
	-gencode arch=compute_90,code=[sm_90,compute_90]
comma := ,
NVCC_ARCH_NAMES = $(sort $(filter sm_%,$(subst =, ,$(subst $(comma), ,\
	$(subst [, ,$(subst ], ,$(NVCC_ARCH)))))))
# -Xptxas -v prints each kernel's registers, spills and shared memory
# for each arch (make CUDA_VERBOSE=1). --threads 0: one nvcc runs the
# passes of its architectures side by side, as many at once as the
# machine has CPUs (cicc for compute_80 beside compute_90's, then ptxas
# for each); attention.cu alone is about half of the module's CPU, so one
# pass at a time it left a core idle at the end of make check's module
# build. Each ptxas of attention.cu holds about 650 MB.
NVCCFLAGS ?= -O2 --threads 0
CUDA_SRC := $(wildcard engine/cuda/*.cu)
# The attention kernels only a switch launches (engine/cuda/
# attention_variants.cu: the staged and row walks, the CPU's order past
# 256 positions), for sm_90 alone, with CUDA_VARIANTS=1: they were most
# of nvcc's time, make check's longest build; without them the module
# runs the default walk (Documentation/gpu.md). tools/gpu-carry.sh sets
# it; the simulator always has them.
CUDA_VARIANTS ?= 0
CUDA_VARIANTS_SRC := engine/cuda/attention_variants.cu
CUDA_VARIANTS_ARCH ?= -gencode arch=compute_90,code=sm_90
CUDA_OBJ := $(patsubst %.cu,$(BUILD)/cuda/%.o,$(if $(filter 1,$(CUDA_VARIANTS)),\
	$(CUDA_SRC),$(filter-out $(CUDA_VARIANTS_SRC),$(CUDA_SRC))))
$(BUILD)/cuda/$(CUDA_VARIANTS_SRC:.cu=.o): NVCC_ARCH = $(CUDA_VARIANTS_ARCH)
CUDA_MODULE := $(BUILD)/lib/llmfs-cuda.so
# The same sources on the CPU (engine/cuda/sim/sim.h): what make check runs.
CXX ?= c++
# initial-exec: the kernels read threadIdx through a thread-local pointer,
# and the default model for a shared object makes each read a call of
# __tls_get_addr (8% of the simulator's time); its 112 bytes of TLS fit
# the room glibc keeps for a dlopen'ed library's.
SIM_CXXFLAGS = -O1 -g -std=c++20 -fPIC -DLLMFS_CUDA_SIM -I$(CUDA_HOME)/include \
	-Wall -Wextra -Wno-unused-parameter -Wno-unknown-pragmas -ffp-contract=off \
	-ftls-model=initial-exec -MMD -MP
SIM_LDFLAGS =
ifeq ($(SANITIZE),1)
SIM_CXXFLAGS += -fsanitize=address,undefined -fno-omit-frame-pointer \
	-fno-sanitize-recover=undefined
SIM_LDFLAGS += -fsanitize=address,undefined
endif
SIM_OBJ := $(patsubst %.cu,$(BUILD)/cuda-sim/%.o,$(CUDA_SRC)) \
	$(BUILD)/cuda-sim/engine/cuda/sim/sim.o
CUDA_SIM_MODULE := $(BUILD)/lib/llmfs-cuda-sim.so
CUDA_MODULES :=
ifeq ($(CUDA),1)
CUDA_MODULES += $(CUDA_MODULE) $(CUDA_SIM_MODULE)
endif

TEST_IO := $(patsubst %.c,$(BUILD)/%,$(wildcard tests/io/test_*.c))
TEST_ENGINE := $(patsubst %.c,$(BUILD)/%,$(wildcard tests/engine/test_*.c))
TEST_FS := $(patsubst %.c,$(BUILD)/%,$(wildcard tests/fs/test_*.c))
TEST_COMMON_SRC := $(wildcard tests/common/*.c)
TEST_COMMON_OBJ := $(TEST_COMMON_SRC:%.c=$(BUILD)/%.o)
TESTS := $(TEST_IO) $(TEST_ENGINE)
# Small C clients that the shell tests drive (not tests of their own).
TEST_CLIENTS := $(BUILD)/tests/fs/read_interrupted \
	$(BUILD)/tests/install/seccomp_exec
# An LD_PRELOAD shim that holds the daemon at a known point (tests/fs/
# fault_paths.c): a model that stays loading, a machine with no free memory.
TEST_SHIMS := $(BUILD)/tests/fs/fault_paths.so
ifeq ($(have_fuse),1)
TESTS += $(TEST_FS)
endif

all: $(TOOLS) $(CUDA_MODULES)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(CFLAGS) -c -o $@ $<

$(BUILD)/fs/%.o: fs/%.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(CFLAGS) $(call pkg_cflags,$(FS_PKGS)) -c -o $@ $<

$(BUILD)/tests/%.o: tests/%.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(CFLAGS) $(call pkg_cflags,$(TEST_PKGS) $(FS_PKGS)) -c -o $@ $<

$(IO_LIB): $(IO_OBJ)
$(ENGINE_LIB): $(ENGINE_OBJ)
$(FS_LIB): $(FS_OBJ)
$(IO_LIB) $(ENGINE_LIB) $(FS_LIB):
	@mkdir -p $(dir $@)
	@rm -f $@
	$(Q)$(AR) rcs $@ $^

# The dependency file is written aside and renamed: make check builds
# these beside tests that run make in $(BUILD), which reads every *.d.
$(BUILD)/cuda/%.o: %.cu
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  NVCC    $<")
	$(Q)$(NVCC) $(NVCCFLAGS) $(NVCC_ARCH) -std=c++20 -D_GNU_SOURCE \
		-DLLMFS_CUDA_ARCHS='"$(NVCC_ARCH_NAMES)"' \
		$(if $(CUDA_VERBOSE),-Xptxas -v) \
		-Xcompiler -fPIC,-Wall,-Wextra,-Wno-unused-parameter \
		-MMD -MP -MF $(@:.o=.d.part) -c -o $@ $< && \
		mv -f $(@:.o=.d.part) $(@:.o=.d)

$(CUDA_MODULE): $(CUDA_OBJ)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(NVCC) -shared -cudart static $(NVCC_ARCH) -o $@ $^ -ldl -lpthread -lrt

$(BUILD)/cuda-sim/%.o: %.cu
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CXX     $< (simulated)")
	$(Q)$(CXX) $(SIM_CXXFLAGS) -x c++ -c -o $@ $<

$(BUILD)/cuda-sim/%.o: %.cc
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CXX     $<")
	$(Q)$(CXX) $(SIM_CXXFLAGS) -c -o $@ $<

$(CUDA_SIM_MODULE): $(SIM_OBJ)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CXX) -shared $(SIM_LDFLAGS) -o $@ $^ -ldl -lpthread

$(ENGINE_TOOLS): $(BUILD)/bin/%: $(BUILD)/tools/%.o $(ENGINE_LIB) $(IO_LIB)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS) -o $@ $< $(ENGINE_LIBS) $(LDLIBS)

$(FS_TOOLS): $(BUILD)/bin/%: $(BUILD)/tools/%.o $(FS_LIB) $(ENGINE_LIB) $(IO_LIB)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS) -o $@ $< $(FS_LIBS) $(LDLIBS)

$(BUILD)/tools/llmfs.o: tools/llmfs.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(CFLAGS) $(call pkg_cflags,$(FS_PKGS)) -c -o $@ $<

$(TEST_IO): $(BUILD)/tests/io/%: $(BUILD)/tests/io/%.o $(TEST_COMMON_OBJ) $(IO_LIB)
	$(Q)$(CC) $(LDFLAGS) -o $@ $< $(TEST_COMMON_OBJ) $(IO_LIBS) \
		$(call pkg_libs,$(TEST_PKGS)) $(LDLIBS)

$(TEST_ENGINE): $(BUILD)/tests/engine/%: $(BUILD)/tests/engine/%.o \
		$(TEST_COMMON_OBJ) $(ENGINE_LIB) $(IO_LIB)
	$(Q)$(CC) $(LDFLAGS) -o $@ $< $(TEST_COMMON_OBJ) $(ENGINE_LIBS) \
		$(call pkg_libs,$(TEST_PKGS)) $(LDLIBS)

$(TEST_FS): $(BUILD)/tests/fs/%: $(BUILD)/tests/fs/%.o $(TEST_COMMON_OBJ) \
		$(FS_LIB) $(ENGINE_LIB) $(IO_LIB)
	$(Q)$(CC) $(LDFLAGS) -o $@ $< $(TEST_COMMON_OBJ) $(FS_LIBS) \
		$(call pkg_libs,$(TEST_PKGS)) $(LDLIBS)

$(TEST_CLIENTS): $(BUILD)/tests/%: $(BUILD)/tests/%.o
	$(Q)$(CC) $(LDFLAGS) -o $@ $< $(LDLIBS)

# Not sanitized: it is preloaded into whichever llmfs the test runs.
$(TEST_SHIMS): $(BUILD)/tests/%.so: tests/%.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) -O2 -g -std=c11 -Wall -Wextra $(filter -Werror,$(CFLAGS)) -fPIC -shared \
		-o $@ $< -ldl

# make aarch64: the engine's tests and llmfs-run cross-built for aarch64
# into build/aarch64 (Debian's cross compiler, the arm64 libraries of
# make deps), for tests/engine/aarch64.sh to run under qemu-aarch64.
CROSS_COMPILE ?= aarch64-linux-gnu-
CROSS_BUILD = build/aarch64
CROSS_PKG_CONFIG_LIBDIR = /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig
CROSS_TESTS = test_golden test_isa test_simd test_elem test_gemm \
	test_gemm_packed test_attention test_tokenizer
CROSS_PKGS = $(IO_PKGS) $(ENGINE_PKGS) $(TEST_PKGS)
aarch64:
	@PKG_CONFIG_LIBDIR=$(CROSS_PKG_CONFIG_LIBDIR) \
		pkg-config --print-errors --exists $(CROSS_PKGS) || \
		{ echo "make aarch64: arm64 libraries missing (make deps)"; \
		  exit 1; }
	$(Q)PKG_CONFIG_LIBDIR=$(CROSS_PKG_CONFIG_LIBDIR) \
		$(MAKE) --no-print-directory CC=$(CROSS_COMPILE)gcc \
		AR=$(CROSS_COMPILE)ar BUILD=$(CROSS_BUILD) SANITIZE= CUDA=0 \
		$(CROSS_TESTS:%=$(CROSS_BUILD)/tests/engine/%) \
		$(CROSS_BUILD)/bin/llmfs-run

# Install what is missing, and only that (needs root, as on CI): deps for
# make check, build-deps for building alone (the Containerfile).
deps: PKGS_WANTED = $(PKGS_DEB) $(PKGS_DEB_CHECK) $(NPM_DEB)
build-deps: PKGS_WANTED = $(PKGS_DEB)
# (pkg:ARCH as well: with a foreign architecture added, a package
# installed for both is ambiguous to dpkg -s by its bare name)
deps build-deps:
	@arch=$$(dpkg --print-architecture); missing=""; \
	for p in $(PKGS_WANTED); do \
		dpkg -s $$p >/dev/null 2>&1 || dpkg -s $$p:$$arch >/dev/null 2>&1 || \
		missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
		case "$$missing" in *:$(CROSS_DEB_ARCH)*) \
			dpkg --print-foreign-architectures | \
				grep -qx $(CROSS_DEB_ARCH) || \
			$$SUDO dpkg --add-architecture $(CROSS_DEB_ARCH);; \
		esac; \
		$$SUDO apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; \
	fi

# The reference: llama.cpp as the npm package node-llama-cpp ships it
# (pinned; ../shared/README.md, section 1), in the git-ignored ref/.
REF_DIR ?= ref
LLAMA_REF_VERSION = 3.22.1
REF_STAMP = $(REF_DIR)/node_modules/node-llama-cpp/package.json
# The tests compare with it: without it make check fails (a registry that
# fails once is tried three times).
$(REF_STAMP):
	@command -v npm >/dev/null || \
		{ echo "npm is missing (make deps): cannot install the reference"; exit 1; }
	$(Q)mkdir -p $(REF_DIR) && cd $(REF_DIR) && \
	{ [ -f package.json ] || npm init -y >/dev/null; } && \
	for try in 1 2 3; do \
		npm install --no-audit --no-fund --loglevel=error \
			node-llama-cpp@$(LLAMA_REF_VERSION) && exit 0; \
		echo "npm install node-llama-cpp@$(LLAMA_REF_VERSION) failed (try $$try of 3)"; \
		sleep 10; \
	done; \
	echo "the reference (node-llama-cpp $(LLAMA_REF_VERSION)) cannot be installed: make check needs it"; \
	exit 1
ref: $(REF_STAMP)

# What the tests run (the simulator, not the CUDA module: see check-run).
TESTS_RUN := $(TESTS) $(TEST_CLIENTS) $(TEST_SHIMS) $(TOOLS) \
	$(filter-out $(CUDA_MODULE),$(CUDA_MODULES))
tests: $(TESTS_RUN) $(CUDA_MODULES)
tests-run: $(TESTS_RUN)

# Every Check binary and tests/*/*.sh; tests/run prints the skipped tests
# with their reasons and the closing "N passed, N failed, N skipped" line;
# a skip that is not for want of hardware (a GPU) fails (Documentation/
# testing.md).
# The tests compare with the reference install (make ref). check-run is a
# second make so that what make deps installed (fuse3) is seen.
# It builds with CHECK_JOBS jobs (a plain `make check`, as CI runs it,
# would build one file at a time), runs that many tests at once
# (TEST_JOBS), and builds the CUDA module for every arch beside the tests
# (tests/run BESIDE): only the tests of tests/run's AFTER_BESIDE
# need it (Documentation/testing.md has the figures).
CHECK_JOBS ?= $(shell nproc 2>/dev/null || echo 2)
TEST_JOBS ?= $(CHECK_JOBS)
check: deps $(REF_STAMP)
	$(Q)$(MAKE) --no-print-directory check-run

check-run:
	@[ "$(have_fuse)" = 1 ] || { echo "pkg-config finds no fuse3 (make deps):" \
		"cannot build llmfs, $(notdir $(TEST_FS)) or the mount tests"; exit 1; }
	$(Q)$(MAKE) --no-print-directory -j$(CHECK_JOBS) tests-run
	$(Q)BUILD=$(BUILD) LLAMA_REF_DIR=$(abspath $(REF_DIR)) TEST_JOBS=$(TEST_JOBS) \
		$(if $(filter 1,$(SANITIZE)),TEST_TIMEOUT_SCALE=6) \
		$(if $(filter $(CUDA_MODULE),$(CUDA_MODULES)),BESIDE='$(MAKE) --no-print-directory -j$(CHECK_JOBS) $(CUDA_MODULE)') \
		tests/run $(TESTS)

# The aarch64 tests make check runs under qemu-user, and the two that only
# the shared models cover there besides (test_attention, test_gemm):
# about twice as long (tests/engine/aarch64.sh).
check-aarch64: deps
	$(Q)AARCH64_FULL=1 tests/engine/aarch64.sh

demo: deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)BUILD=$(BUILD) MODEL="$(MODEL)" tools/demo.sh

# The randomized operation test for SECONDS (tests/fs/random.sh): new
# seeds until the time is up; a failing seed prints its reproduction.
SECONDS ?= 300
stress: deps
	$(Q)$(MAKE) --no-print-directory tests
	$(Q)BUILD=$(BUILD) RANDOM_SECONDS=$(SECONDS) RANDOM_SEEDS=1000 \
		bash tests/fs/random.sh

FUZZ_SECONDS ?= 60
fuzz:
	$(Q)BUILD=$(BUILD) FUZZ_SECONDS=$(FUZZ_SECONDS) tests/fuzz/run


bench: deps $(REF_STAMP)
	$(Q)$(MAKE) --no-print-directory all
	$(Q)BUILD=$(BUILD) LLAMA_REF_DIR=$(abspath $(REF_DIR)) tools/bench.sh

# Installed where other filesystems live (Documentation/install.md): the
# commands a user runs, their man pages, the systemd unit, the documentation.
PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
MANDIR ?= $(PREFIX)/share/man
DOCDIR ?= $(PREFIX)/share/doc/llmfs
# systemd reads /usr/local/lib/systemd/system as well as /usr/lib/...
UNITDIR ?= $(PREFIX)/lib/systemd/system
INSTALL ?= install
INSTALL_BIN := llmfs llmfs-run llmfs-inspect
INSTALL_BIN_BUILT := $(INSTALL_BIN:%=$(BUILD)/bin/%)
# The CUDA module, where a build has one, where the installed llmfs looks
# for it (engine/cuda/loader.c: <bindir>/../lib/llmfs/): one package
# runs on machines without CUDA and computes on a GPU where there is one
# (Documentation/install.md).
INSTALL_MODULE := $(filter $(CUDA_MODULE),$(CUDA_MODULES))
MODULEDIR = $(PREFIX)/lib/llmfs
INSTALL_MAN := $(INSTALL_BIN:%=Documentation/%.1)
INSTALL_DOC := README.md $(wildcard Documentation/*.md)
UNIT := packaging/llmfs@.service

install: $(INSTALL_BIN_BUILT) $(INSTALL_MODULE)
	$(Q)$(INSTALL) -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1 \
		$(DESTDIR)$(DOCDIR) $(DESTDIR)$(UNITDIR)
	$(Q)$(INSTALL) -m 755 $(INSTALL_BIN_BUILT) $(DESTDIR)$(BINDIR)
	$(if $(INSTALL_MODULE),$(Q)$(INSTALL) -d $(DESTDIR)$(MODULEDIR) && \
		$(INSTALL) -m 755 $(INSTALL_MODULE) $(DESTDIR)$(MODULEDIR))
	$(Q)$(INSTALL) -m 644 $(INSTALL_MAN) $(DESTDIR)$(MANDIR)/man1
	$(Q)$(INSTALL) -m 644 $(INSTALL_DOC) $(DESTDIR)$(DOCDIR)
	$(Q)sed 's|@BINDIR@|$(BINDIR)|g' $(UNIT) > $(DESTDIR)$(UNITDIR)/$(notdir $(UNIT))
	$(Q)chmod 644 $(DESTDIR)$(UNITDIR)/$(notdir $(UNIT))

uninstall:
	rm -f $(INSTALL_BIN:%=$(DESTDIR)$(BINDIR)/%) \
		$(INSTALL_MAN:Documentation/%=$(DESTDIR)$(MANDIR)/man1/%) \
		$(DESTDIR)$(UNITDIR)/$(notdir $(UNIT)) \
		$(addprefix $(DESTDIR)$(DOCDIR)/,$(notdir $(INSTALL_DOC))) \
		$(DESTDIR)$(MODULEDIR)/$(notdir $(CUDA_MODULE))
	-rmdir $(DESTDIR)$(DOCDIR) $(DESTDIR)$(MODULEDIR) 2>/dev/null

# The Debian package: make install into a staging tree with PREFIX=/usr,
# then dpkg-deb; Depends come from dpkg-shlibdeps (packaging/deb.sh).
# DEB_OUT and DEB_STAGE let a test build it outside build/.
DEB_OUT ?= $(BUILD)
DEB_STAGE ?= $(BUILD)/deb
DEB_MAINTAINER ?= llmfs maintainers <maintainers@users.noreply.a-seed-cfb8e0c5.example>
deb: $(INSTALL_BIN_BUILT) $(INSTALL_MODULE)
	$(Q)rm -rf $(DEB_STAGE)
	$(Q)$(MAKE) --no-print-directory install PREFIX=/usr \
		DESTDIR=$(abspath $(DEB_STAGE))/root
	$(Q)VERSION=$(VERSION) MAINTAINER="$(DEB_MAINTAINER)" \
		packaging/deb.sh $(DEB_STAGE) $(DEB_OUT)

# Every tracked *.c and *.h but engine/tokenizer/unicode_data.c: the table
# that gen_unicode_data.py beside it writes, four ranges a line, which
# clang-format would realign into uneven columns (a generated file is fixed
# in its generator, not by hand).
CLANG_FORMAT ?= clang-format
FORMAT_EXCLUDE := engine/tokenizer/unicode_data.c
FORMAT_FILES = $(filter-out $(FORMAT_EXCLUDE),$(shell git ls-files '*.c' '*.h'))
format-tool:
	@command -v $(CLANG_FORMAT) >/dev/null || \
		{ echo "$(CLANG_FORMAT) is missing (make deps)"; exit 1; }
format: format-tool
	$(Q)$(CLANG_FORMAT) -i $(FORMAT_FILES)
format-check: format-tool
	$(Q)$(CLANG_FORMAT) --dry-run -Werror $(FORMAT_FILES)

clean:
	rm -rf build

.PHONY: all aarch64 check-aarch64 deps build-deps tests tests-run check check-run demo fuzz stress bench ref clean install uninstall deb \
	format format-check format-tool

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
