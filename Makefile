# iser-rs: top-level entry points.
#
#   make            build iser_rs.ko against $(KDIR) (default: the cached test kernel)
#   make run        the demo: build, boot the test VM, load iser_rs, show it working
#   make check      all tests: host (cargo) and guest (VM), ends with "N passed, N failed"
#   make bench      fio benchmark iser_rs vs ib_iser vs iscsi_tcp (ratios, JSON, chart)
#   make kernel     only build (or find) the cached test kernel
#   make peer       build tools/iser-peer, the userspace iSER test target (host binary)
#   make clippy     the kernel's CLIPPY=1 lint build of the module
#
# DEBUG=1 selects the debug kernel (KASAN, lockdep, kmemleak, ...) for all of them.
# KERNEL=debian (or debian-X.Y[.Z]) builds for Debian's own Rust-enabled kernel
# instead (scripts/debian-kernel fetches and prepares it; the build runs in a
# trixie build root with the toolchain Debian used): make, make clippy, make
# bench. KERNEL=test (the default) is the 6.12 test kernel.

SHELL := /bin/bash
REPO  := $(abspath $(dir $(lastword $(MAKEFILE_LIST))))
RUSTC_KERNEL := /usr/bin/rustc
BINDGEN_KERNEL := $(HOME)/.cargo/bin/bindgen
export DEBUG ?= 0
export KERNEL ?= test
DEBIAN := $(filter debian%,$(KERNEL))

# Resolved lazily: only targets that need the kernel pay for finding/building it.
# (make 4.3 does not pass exported variables to $(shell): hand DEBUG over.)
KDIR ?= $(shell DEBUG=$(DEBUG) $(REPO)/scripts/build-kernel)
KMAKE = $(MAKE) -C $(KDIR) M=$(REPO) RUSTC=$(RUSTC_KERNEL) BINDGEN=$(BINDGEN_KERNEL) \
        $(if $(filter 1,$(DEBUG)),LLVM=1)

.PHONY: all modules peer deps kernel run check check-host check-guest bench clippy fmt clean

all: modules peer

# The guest tests run the host-built peer (the guest sees the host's files).
peer: deps
	cargo build --release --manifest-path $(REPO)/tools/iser-peer/Cargo.toml

deps:
	@$(REPO)/scripts/install-deps

modules: deps
ifneq ($(DEBIAN),)
	$(REPO)/scripts/debian-make $(KERNEL) modules
else
	+$(KMAKE) modules
endif

kernel: deps
ifneq ($(DEBIAN),)
	@$(REPO)/scripts/debian-kernel $(KERNEL)
else
	@echo $(KDIR)
endif

clippy: deps
ifneq ($(DEBIAN),)
	$(REPO)/scripts/debian-make $(KERNEL) clippy
else
	+$(KMAKE) CLIPPY=1 CLIPPY_DRIVER=/usr/bin/clippy-driver modules
endif

fmt:
	cargo fmt --manifest-path rust/proto/Cargo.toml
	cargo fmt --manifest-path tools/iser-peer/Cargo.toml
	rustfmt --edition 2021 --config-path $(REPO)/.rustfmt.toml rust/*.rs rust/sys/*.rs rust/driver/*.rs

run: modules
	$(REPO)/scripts/vm-run $(REPO)/scripts/demo

check: deps
	@$(REPO)/scripts/check

bench: modules
	$(REPO)/scripts/bench

clean:
	-+$(KMAKE) clean
	rm -f rust/bindings_generated.rs
