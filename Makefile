# podprof build. `make` builds build/release/podprof (and build/podprof, a copy:
# only ever of the release build); `make FLAVOUR=asan` builds into build/asan
# with ASan+UBSan, and leaves build/podprof alone. `make test` runs the suite.
FLAVOUR ?= release
V ?= 0
Q := $(if $(filter 1,$(V)),,@)

BUILD  := build/$(FLAVOUR)
CC     ?= cc
CFLAGS ?= -O2 -g
WARN   := -std=gnu11 -Wall -Wextra -Werror -Wshadow -Wformat=2 -Wstrict-prototypes \
          -Wmissing-prototypes -Wold-style-definition -Wvla -Wundef -Wpointer-arith
PKGS   := libuv libunwind-ptrace libprotobuf-c zlib liblzma
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null) -lunwind-x86_64 -lm
LLHTTP_SRC ?= /usr/share/llhttp
LLHTTP_INC ?= /usr/share/include/llhttp

ifeq ($(FLAVOUR),asan)
SAN := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
endif
# make torture: ASan+UBSan, and the HTTP layer's X-Podprof-Fail-Alloc hook
# (sidecar/server/http.c), which no other flavour has.
ifeq ($(FLAVOUR),torture)
SAN := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer -DPODPROF_TORTURE
endif
# libFuzzer harnesses (make fuzz): clang, every object instrumented for coverage.
ifeq ($(FLAVOUR),fuzz)
CC := clang
SAN := -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
endif
FUZZERS := $(patsubst tests/fuzz/fuzz_%.c,$(BUILD)/fuzz-%,$(wildcard tests/fuzz/fuzz_*.c))
FUZZ_SECONDS ?= 60

VERSION := $(shell cat VERSION 2>/dev/null || echo 0.0.0)
GIT_REV := $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
ALL_CFLAGS = $(CFLAGS) $(SAN) $(WARN) -MMD -MP -D_GNU_SOURCE -I. -I$(BUILD)/gen \
             -I$(LLHTTP_INC) $(PKG_CFLAGS) -DPODPROF_VERSION='"$(VERSION) ($(GIT_REV))"' $(EXTRA_CFLAGS)

SIDECAR_SRC := $(filter-out sidecar/main.c,$(sort $(shell find sidecar -name '*.c')))
PTRACE_SRC  := $(sort $(shell find ptrace -name '*.c'))
ENCODER_SRC := $(wildcard encoder/*.c)
BASE_SRC    := $(wildcard base/*.c)
LIB_OBJ := $(addprefix $(BUILD)/,$(SIDECAR_SRC:.c=.o) $(PTRACE_SRC:.c=.o) $(ENCODER_SRC:.c=.o) \
             $(BASE_SRC:.c=.o)) \
           $(BUILD)/gen/profile.pb-c.o \
           $(BUILD)/llhttp/llhttp.o $(BUILD)/llhttp/api.o $(BUILD)/llhttp/http.o
UNIT_SRC := $(wildcard tests/unit/*.c)
FIXTURES := $(patsubst tests/fixtures/%.c,$(BUILD)/fixtures/%,$(wildcard tests/fixtures/*.c))

.PHONY: all test unit integration clean deps demo lint structure fixtures bench fuzz fuzzers soak e2e torture stress
all: $(BUILD)/podprof $(BUILD)/libpodprof-alloc.so

# build/podprof and build/libpodprof-alloc.so, what a user runs (README,
# scripts/demo.sh), are copies of the release build only: another flavour
# never writes them. Copied whenever they differ from build/release's, not by
# their dates (an older Makefile copied instrumented builds over them).
# tests/release-copy.sh checks it after scripts/check.sh's stages.
ifeq ($(FLAVOUR),release)
all: build/podprof build/libpodprof-alloc.so
.PHONY: build/podprof build/libpodprof-alloc.so
build/podprof build/libpodprof-alloc.so: build/%: $(BUILD)/%
	$(Q)cmp -s $< $@ || { mkdir -p build && cp $< $@.tmp && mv -f $@.tmp $@; }
endif

$(BUILD)/podprof: $(BUILD)/sidecar/main.o $(LIB_OBJ)
	@echo "  LD      $@"
	$(Q)$(CC) $(CFLAGS) $(SAN) -o $@ $^ $(PKG_LIBS) -lpthread

# The allocation agent (agent/): its own flags, never sanitized (it runs
# inside the application), libc only, GCC's unwinder linked in and
# hidden (exports.map).
AGENT_SRC := $(wildcard agent/*.c)
AGENT_CFLAGS := -O2 -g -fPIC -fno-plt -fvisibility=hidden -fno-omit-frame-pointer $(WARN) -MMD -MP \
                -D_GNU_SOURCE -I.
$(BUILD)/agent/%.o: agent/%.c
	@echo "  CC      $@"
	$(Q)mkdir -p $(dir $@) && $(CC) $(AGENT_CFLAGS) -c -o $@ $<

# GCC's unwinder for the agent: libgcc_eh.a with the glibc symbols that
# would tie the agent to a recent glibc renamed. _dl_find_object (2.35) to
# the agent's agent/findobj.c, which uses it when the running glibc has it;
# pthread_once and __pthread_key_create (2.34, weak) to names left undefined
# and hidden (agent/findobj.c), so 0: libgcc's threads check then says
# "single-threaded", which changes only its locking of frames registered
# with __register_frame_info (none in the agent) and its one-time register
# table set-up (done by agent/records.c before any thread unwinds).
LIBGCC_EH := $(shell $(CC) -print-file-name=libgcc_eh.a)
$(BUILD)/agent/libgcc_eh.a: $(LIBGCC_EH)
	@echo "  OBJCOPY $@"
	$(Q)mkdir -p $(dir $@) && objcopy --redefine-sym _dl_find_object=ppa_dl_find_object \
		--redefine-sym pthread_once=ppa_no_pthread_once \
		--redefine-sym __pthread_key_create=ppa_no_pthread_key_create $< $@.tmp && mv -f $@.tmp $@

$(BUILD)/libpodprof-alloc.so: $(addprefix $(BUILD)/,$(AGENT_SRC:.c=.o)) agent/exports.map $(BUILD)/agent/libgcc_eh.a
	@echo "  LD      $@"
	$(Q)$(CC) -shared -static-libgcc -o $@ $(filter %.o,$^) -Wl,--version-script=agent/exports.map \
		-Wl,-z,relro,-z,now $(BUILD)/agent/libgcc_eh.a

$(BUILD)/gen/profile.pb-c.c $(BUILD)/gen/profile.pb-c.h: encoder/profile.proto
	@echo "  PROTOC  $<"
	$(Q)mkdir -p $(BUILD)/gen && protoc-c --proto_path=encoder --c_out=$(BUILD)/gen encoder/profile.proto

# System call names, from the kernel headers this machine builds against.
SYSCALL_HDR ?= /usr/include/x86_64-linux-gnu/asm/unistd_64.h
$(BUILD)/gen/syscalls.h: $(SYSCALL_HDR)
	@echo "  GEN     $@"
	$(Q)mkdir -p $(BUILD)/gen && sed -n 's/^#define __NR_\([a-z0-9_]*\) \([0-9]*\)$$/[\2] = "\1",/p' $< > $@.tmp && \
		test -s $@.tmp && mv -f $@.tmp $@

# The flame graph page (encoder/flame.html) as a C string literal, a line each.
$(BUILD)/gen/flame_page.h: encoder/flame.html
	@echo "  GEN     $@"
	$(Q)mkdir -p $(BUILD)/gen && sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/?/\\?/g' -e 's/^/"/' -e 's/$$/\\n"/' $< > $@.tmp && \
		mv -f $@.tmp $@

# Generated code is not ours: compile it without -Werror and our extra warnings.
$(BUILD)/gen/profile.pb-c.o: $(BUILD)/gen/profile.pb-c.c
	@echo "  CC      $@"
	$(Q)$(CC) $(CFLAGS) $(SAN) $(PKG_CFLAGS) -I$(BUILD)/gen -c -o $@ $<

$(BUILD)/llhttp/%.o: $(LLHTTP_SRC)/%.c
	@echo "  CC      $@"
	$(Q)mkdir -p $(dir $@) && $(CC) $(CFLAGS) $(SAN) -w -I$(LLHTTP_INC) -c -o $@ $<

# The objects that print PODPROF_VERSION are rebuilt when it changes (a new
# commit), else a build says an older revision than it runs: the stamp is
# rewritten only when its text differs.
VERSION_STAMP := $(BUILD)/gen/version.stamp
$(VERSION_STAMP): FORCE
	$(Q)mkdir -p $(dir $@) && echo '$(VERSION) ($(GIT_REV))' | cmp -s - $@ || \
		echo '$(VERSION) ($(GIT_REV))' > $@
$(addprefix $(BUILD)/,$(addsuffix .o,sidecar/main sidecar/server/cfg sidecar/server/formats \
                                      sidecar/pages/metrics)): $(VERSION_STAMP)
.PHONY: FORCE
FORCE:

$(BUILD)/%.o: %.c | $(BUILD)/gen/profile.pb-c.h $(BUILD)/gen/syscalls.h $(BUILD)/gen/flame_page.h
	@echo "  CC      $@"
	$(Q)mkdir -p $(dir $@) && $(CC) $(ALL_CFLAGS) -c -o $@ $<

# CPython's layouts from each release's own headers, printed by a program
# built with them: the unit test python_layout_matches_headers holds
# ptrace/runtimes/python/interp.c's table to them. 3.11: Debian's python3.11-dev; 3.12:
# any install's headers (pyenv's here; PY312_INC= to point elsewhere). A
# release whose headers are missing is not built (its check skips).
PY311_INC ?= /usr/include/python3.11
PY312_INC ?= $(firstword $(wildcard /root/.pyenv/versions/3.12.*/include/python3.12))
PY_OFFSETS := $(if $(wildcard $(PY311_INC)/internal/pycore_frame.h),$(BUILD)/py311-offsets) \
              $(if $(wildcard $(PY312_INC)/internal/pycore_frame.h),$(BUILD)/py312-offsets)
# 3.13 to 3.15: where each one's _Py_DebugOffsets keeps what podprof reads,
# printed by a program built with its headers (tests/unit/py/py_debug_offsets.c):
# python_tables_match_headers holds ptrace/runtimes/python/offsets.c's
# descriptors to them. The headers are those of the sid chroot that
# scripts/runtimes.sh provisions (PY_SID= to point elsewhere); Debian keeps
# pyconfig.h in a multiarch directory, reached through a link of our own.
PY_SID ?= $(or $(PODPROF_RUNTIMES),/var/cache/podprof/runtimes)/sid
PY_DEBUG_OFFSETS := $(foreach m,13 14 15,$(if $(wildcard $(PY_SID)/usr/include/python3.$(m)/internal/pycore_frame.h),$(BUILD)/py3$(m)-debugoffsets))

# Unit tests: one binary, each test forked by the harness.
# (the agent's arithmetic is held to libm's there too)
$(BUILD)/unit-tests: $(addprefix $(BUILD)/,$(UNIT_SRC:.c=.o)) $(LIB_OBJ) $(BUILD)/agent/weight.o | $(PY_OFFSETS) $(PY_DEBUG_OFFSETS)
	@echo "  LD      $@"
	$(Q)$(CC) $(CFLAGS) $(SAN) -o $@ $^ $(PKG_LIBS) -lpthread

$(BUILD)/py311-offsets: tests/unit/py/py_offsets.c
	@echo "  CC      $@"
	$(Q)mkdir -p $(dir $@) && $(CC) -O0 -w -I$(PY311_INC) -o $@ $<

$(BUILD)/py312-offsets: tests/unit/py/py_offsets.c
	@echo "  CC      $@"
	$(Q)mkdir -p $(dir $@) && $(CC) -O0 -w -I$(PY312_INC) -o $@ $<

$(BUILD)/py31%-debugoffsets: tests/unit/py/py_debug_offsets.c
	@echo "  CC      $@"
	$(Q)mkdir -p $(BUILD)/pyinc && ln -sfn $(PY_SID)/usr/include/x86_64-linux-gnu $(BUILD)/pyinc/x86_64-linux-gnu && \
		$(CC) -O0 -w -I$(PY_SID)/usr/include/python3.1$* -I$(BUILD)/pyinc -o $@ $<

# Fixture targets are built the way the issue describes real targets: -O2, no frame pointers.
$(BUILD)/fixtures/%: tests/fixtures/%.c
	@echo "  CC      $@"
	$(Q)mkdir -p $(dir $@) && $(CC) -O2 -g -fomit-frame-pointer -pthread -Wall -Werror -o $@ $<

# The agent's fast stack walk beside GCC's unwinder, linked with the
# agent's objects (the walk itself, its object lookup, the renamed libgcc).
# Beside it, one function built twice with frames of two sizes (the code
# around its call the same), each a shared object it loads in turn.
$(BUILD)/fixtures/unwindcheck: tests/fixtures/unwindcheck.c $(BUILD)/agent/unwind.o $(BUILD)/agent/findobj.o \
	$(BUILD)/agent/libgcc_eh.a | $(BUILD)/fixtures/unwindframe-256.so $(BUILD)/fixtures/unwindframe-1024.so
	@echo "  CC      $@"
	$(Q)mkdir -p $(dir $@) && $(CC) -O2 -g -fomit-frame-pointer -pthread -Wall -Werror -D_GNU_SOURCE -I. -o $@ $< \
		$(BUILD)/agent/unwind.o $(BUILD)/agent/findobj.o -static-libgcc $(BUILD)/agent/libgcc_eh.a -ldl

$(BUILD)/fixtures/unwindframe-%.so: tests/fixtures/unwindframe/frame.c
	@echo "  CC      $@"
	$(Q)mkdir -p $(dir $@) && $(CC) -O2 -g -fomit-frame-pointer -fPIC -shared -Wall -Werror -DPAD=$* -o $@ $<

# The same fixture with its names only in .gnu_debugdata (MiniDebugInfo).
$(BUILD)/fixtures/busy-minidebug: $(BUILD)/fixtures/busy tests/fixtures/minidebug.sh
	@echo "  MINIDBG $@"
	$(Q)tests/fixtures/minidebug.sh $< $@

# Go fixtures, built by Debian's Go (golang-go) without the network: GOPATH
# mode, no modules, caches under the build directory, no VCS or paths
# stamped in. gohot-stripped has no .symtab: its names come from .gopclntab.
# Go is a declared dependency (scripts/packages.txt): without it make
# fixtures fails, saying so, rather than leave the Go tests nothing to run.
GO ?= go
GO_ENV := GO111MODULE=off GOFLAGS= GOPATH=$(abspath $(BUILD))/gopath GOCACHE=$(abspath $(BUILD))/gocache
GO_BUILD := $(GO_ENV) $(GO) build -trimpath -buildvcs=false
GO_CHECK := { command -v $(GO) > /dev/null || { echo "make: $(GO) not found: Go (golang-go) is a declared \
	dependency, scripts/deps.sh installs it" >&2; exit 1; }; }
GO_FIXTURES := $(BUILD)/fixtures/gohot $(BUILD)/fixtures/gohot-stripped $(BUILD)/fixtures/gocgo \
	$(BUILD)/fixtures/goalloc $(BUILD)/fixtures/goalloc-cgo $(BUILD)/fixtures/goroutines \
	$(BUILD)/fixtures/goroutines-stripped

$(BUILD)/fixtures/gohot: tests/fixtures/gohot/main.go
	@echo "  GO      $@"
	$(Q)$(GO_CHECK) && mkdir -p $(dir $@) && CGO_ENABLED=0 $(GO_BUILD) -o $@ ./tests/fixtures/gohot

# goalloc: known heap and allocation profiles, kept in Go's own records
# (net/http/pprof imported, so the linker leaves memory profiling on).
$(BUILD)/fixtures/goalloc: tests/fixtures/goalloc/main.go
	@echo "  GO      $@"
	$(Q)$(GO_CHECK) && mkdir -p $(dir $@) && CGO_ENABLED=0 $(GO_BUILD) -o $@ ./tests/fixtures/goalloc

# The same with cgo (its net package then links libc): a Go program that
# the allocation agent can be preloaded into, beside Go's own records.
$(BUILD)/fixtures/goalloc-cgo: tests/fixtures/goalloc/main.go
	@echo "  GO      $@"
	$(Q)$(GO_CHECK) && mkdir -p $(dir $@) && CGO_ENABLED=1 $(GO_BUILD) -o $@ ./tests/fixtures/goalloc

# goroutines: a service with known goroutines (tests/integration/test_goroutines.py
# builds it again with Go 1.26 and 1.27); -s -w as production images are built.
$(BUILD)/fixtures/goroutines: tests/fixtures/goroutines/main.go
	@echo "  GO      $@"
	$(Q)$(GO_CHECK) && mkdir -p $(dir $@) && CGO_ENABLED=0 $(GO_BUILD) -o $@ ./tests/fixtures/goroutines

$(BUILD)/fixtures/goroutines-stripped: tests/fixtures/goroutines/main.go
	@echo "  GO      $@"
	$(Q)$(GO_CHECK) && mkdir -p $(dir $@) && CGO_ENABLED=0 $(GO_BUILD) -ldflags='-s -w' -o $@ \
		./tests/fixtures/goroutines

$(BUILD)/fixtures/gohot-stripped: $(BUILD)/fixtures/gohot
	@echo "  STRIP   $@"
	$(Q)strip -o $@ $<

$(BUILD)/fixtures/gocgo: tests/fixtures/gocgo/main.go
	@echo "  GO      $@"
	$(Q)$(GO_CHECK) && mkdir -p $(dir $@) && CGO_ENABLED=1 $(GO_BUILD) -o $@ ./tests/fixtures/gocgo

fixtures: $(FIXTURES) $(BUILD)/fixtures/busy-minidebug $(GO_FIXTURES)

$(BUILD)/fuzz-%: $(BUILD)/tests/fuzz/fuzz_%.o $(LIB_OBJ)
	@echo "  LD      $@"
	$(Q)$(CC) $(CFLAGS) $(subst fuzzer-no-link,fuzzer,$(SAN)) -o $@ $^ $(PKG_LIBS) -lpthread

fuzzers: $(FUZZERS)

# Every harness for FUZZ_SECONDS under ASan+UBSan, from the committed seeds.
fuzz:
	$(MAKE) FLAVOUR=fuzz fuzzers
	tests/fuzz/run.sh build/fuzz $(FUZZ_SECONDS)

# (fixtures: a few unit tests read the fixtures beside them, and fail without)
unit: $(BUILD)/unit-tests fixtures
	$(BUILD)/unit-tests

test: all $(BUILD)/unit-tests fixtures
	tests/run.sh $(FLAVOUR)

deps:
	scripts/deps.sh

demo: all fixtures
	scripts/demo.sh

lint: structure
	@! grep -nE '\b(atoi|atol|sprintf|strcpy|strcat|strtok|gets)\(' sidecar/main.c $(SIDECAR_SRC) $(PTRACE_SRC) encoder/*.c base/*.c || \
		{ echo "lint: banned function (CONVENTIONS H15)"; exit 1; }
	@! grep -nE '^#include "(ptrace|sidecar)/' encoder/*.c encoder/*.h || \
		{ echo "lint: encoder/ includes no ptrace/ or sidecar/ header (docs/ARCHITECTURE.md)"; exit 1; }

# The structure's rules (scripts/structure.py): no .c over 900 lines, no
# raw allocation outside base/, no loop of files, no include of a higher
# layer, one header per module. Reads the objects' symbols: builds first.
structure: all
	python3 scripts/structure.py $(BUILD)

# Every unit test again with each of its allocations failing in turn, then
# HTTP scenarios against a running podprof with the Nth allocation of a
# request failing (tests/torture/run.py), under ASan+UBSan.
TORTURE_MAX ?= 300
torture:
	$(MAKE) FLAVOUR=torture all fixtures build/torture/unit-tests
	tests/torture/run.sh build/torture $(TORTURE_MAX)

clean:
	rm -rf build

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)

# The thread-dump timer of make bench: the sampler's API, no HTTP.
$(BUILD)/bench-snapshot: $(BUILD)/tests/bench/snapshot.o $(LIB_OBJ)
	@echo "  LD      $@"
	$(Q)$(CC) $(CFLAGS) $(SAN) -o $@ $^ $(PKG_LIBS) -lpthread

# The malloc-bound microbenchmark of make bench (alone and under the
# allocation agent): built like a fixture, -O2 without frame pointers.
$(BUILD)/bench-malloc: tests/bench/malloc.c
	@echo "  CC      $@"
	$(Q)mkdir -p $(dir $@) && $(CC) -O2 -g -fomit-frame-pointer -pthread $(WARN) -D_GNU_SOURCE -o $@ $<

# The floor of any malloc interposer, beside the agent in make bench's
# microbenchmark: built with the agent's flags.
$(BUILD)/bench-malloc-floor.so: tests/bench/mallocfloor.c
	@echo "  CC      $@"
	$(Q)mkdir -p $(dir $@) && $(CC) $(AGENT_CFLAGS) -shared -o $@ $< -Wl,-z,relro,-z,now

# The floor of make bench's new-thread stop: a tracer that only lets every
# stop go, built like a fixture.
$(BUILD)/bench-mintrace: tests/bench/mintrace.c
	@echo "  CC      $@"
	$(Q)mkdir -p $(dir $@) && $(CC) -O2 -g $(WARN) -D_GNU_SOURCE -o $@ $<

# The flame graph page of make bench: random stacks through encoder/flame.c.
$(BUILD)/bench-flamegen: $(BUILD)/tests/bench/flamegen.o $(LIB_OBJ)
	@echo "  LD      $@"
	$(Q)$(CC) $(CFLAGS) $(SAN) -o $@ $^ $(PKG_LIBS) -lpthread

bench: deps all fixtures $(BUILD)/bench-snapshot $(BUILD)/bench-malloc $(BUILD)/bench-malloc-floor.so \
	$(BUILD)/bench-mintrace \
	$(BUILD)/bench-flamegen
	python3 tests/bench/bench.py build/$(FLAVOUR)

# Long runs of the safety tests, under each backend (the default, then
# ptrace): SOAK_KILLS SIGKILLs at random moments, each with a signal in
# flight (1000: issue 38's proof that no signal is lost; a fifth of a second
# each), floods of bad requests, thread churn, signals while profiled.
# The figures go in the closing notes; make bench's soak section is a
# shorter run of the kills alone.
SOAK_KILLS ?= 1000
SOAK_FLOOD ?= 300
# Seconds one test may take (the runner's own limit is 240).
SOAK_TIMEOUT ?= 7200
SOAK_TESTS = sigkill_at_random_moments_never_harms_the_target \
	flood_of_bad_requests_then_a_correct_profile thread_churn_while_profiled \
	signals_delivered_exactly_once_while_profiled timer_signals_all_accounted_for_while_profiled
soak: all fixtures
	PODPROF_TEST_TIMEOUT=$(SOAK_TIMEOUT) PODPROF_KILLS=$(SOAK_KILLS) PODPROF_FLOOD_ROUNDS=$(SOAK_FLOOD) \
		python3 tests/integration/run.py build/$(FLAVOUR) $(SOAK_TESTS)
	PODPROF_TEST_TIMEOUT=$(SOAK_TIMEOUT) PODPROF_KILLS=$(SOAK_KILLS) PODPROF_FLOOD_ROUNDS=$(SOAK_FLOOD) \
		PODPROF_BACKEND=ptrace python3 tests/integration/run.py build/$(FLAVOUR) $(SOAK_TESTS)

# Every test that compares shares, rates or times (marked @figures) again
# and again with every core taken by a busy process: each test STRESS_RUNS
# times, the first failing run and each figure's spread over the runs
# reported (scripts/check.sh runs each once).
STRESS_RUNS ?= 10
stress: all fixtures
	python3 tests/stress/figures.py build/$(FLAVOUR) --runs $(STRESS_RUNS)

# The pod end-to-end test: the image, the chart and a real pod with podman
# (tests/e2e/run.sh; a few minutes, the first run longer: it makes the base image).
e2e:
	scripts/deps.sh
	tests/e2e/run.sh
