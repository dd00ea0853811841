# qemu-drbd: build QEMU 10.0 with the drbd driver, run it, test it.
#
#   make          install build dependencies, fetch QEMU, build, run the demo
#   make check    build if needed, run the drbd unit tests and iotests
#                 (building first the previous releases that drbd-upgrade
#                 upgrades from: scripts/build-previous.sh, into
#                 build/qemu-NAME, once per release),
#                 and (as root) the Pacemaker failover test of the agent
#                 (tests/ha/test-drbd-failover.py; DRBD_CLUSTER_TEST=0
#                 leaves it out, DRBD_CLUSTER_ARGS="--hosts 3
#                 --failovers 4" runs less)
#   make check-qemu  QEMU's own iotests on a drbd node (not in make check)
#   make check-ha a corosync + Pacemaker cluster of 2, then 3 hosts on this
#                 machine, each in its own namespaces (tests/ha/README.rst):
#                 10 failovers each (kill -9 a host, cut its links), with
#                 Pacemaker's Stateful agent: the harness alone; root
#                 HA_ARGS="--hosts 2 --failovers 4" runs fewer
#   make bench    run the benchmarks in tests/bench
#   make install  build if needed, then install under $(DESTDIR)$(PREFIX)
#                 (PREFIX=/usr/local): qemu-system-x86_64, qemu-storage-daemon,
#                 qemu-img, qemu-io and qemu-nbd to $(PREFIX)/bin (firmware
#                 and keymaps come from Debian's seabios, ipxe-qemu and
#                 qemu-system-data), what install-tools installs, and the
#                 systemd unit qemu-drbd@.service to $(SYSTEMD_UNIT_DIR)
#                 ($(PREFIX)/lib/systemd/system)
#   make install-tools  install qemu-drbdadm to $(PREFIX)/sbin,
#                 the OCF agent to $(OCF_ROOT)/resource.d/qemu-drbd/drbd
#                 and the libvirt hook to $(PREFIX)/libexec/qemu-drbd
#   make fuzz     build the libFuzzer targets of tests/fuzz (installing clang
#                 if missing) and run each for FUZZ_SECONDS (default 60);
#                 fails if one finds a crash (see tests/fuzz/README.rst)
#   make mutate   mutation testing (scripts/mutate.py): plant each one-line
#                 bug of tests/mutation/mutants.txt alone in the sources,
#                 rebuild, run the tests it names, put the source back, and
#                 print which tests killed which mutant, and the score.
#                 It edits block/drbd/ while it runs (restoring each file,
#                 and the build, at the end): not while you edit there.
#                 MUTATE_ARGS="--only ID,..." runs some of them
#
#   SANITIZE=1    (with build or check) a second build, under
#                 build/qemu-build-san, with AddressSanitizer and UBSan;
#                 check then fails on any sanitizer report
#
# QEMU's source and all build outputs live under build/ (ignored by git).
# Compiler output is cached by ccache outside the tree, in $(CCACHE_DIR).

TOP      := $(CURDIR)
B        := $(TOP)/build
SRC      := $(B)/qemu-src
ifeq ($(SANITIZE),1)
BLD      := $(B)/qemu-build-san
CONFIGURED := $(B)/configure-san.stamp
export DRBD_SANITIZE := 1
else
BLD      := $(B)/qemu-build
CONFIGURED := $(B)/configure.stamp
endif
MESONDIR := $(B)/meson
PREFIX   ?= /usr/local

export CCACHE_DIR      ?= /var/cache/qemu-drbd/ccache
export CCACHE_BASEDIR  := $(TOP)
export CCACHE_NOHASHDIR := 1
export CCACHE_MAXSIZE  ?= 5G
export PYTHONPATH      := $(MESONDIR)/usr/lib/python3/dist-packages$(if $(PYTHONPATH),:$(PYTHONPATH))

TARGETS := qemu-system-x86_64 storage-daemon/qemu-storage-daemon qemu-img qemu-io qemu-nbd

.PHONY: all deps build demo check check-qemu check-ha bench fuzz mutate clean distclean install install-tools
all: demo

deps:
	@sh scripts/deps.sh

# A new hook patch or fetch script means a fresh source tree.
$(B)/source.stamp: scripts/get-qemu.sh scripts/qemu-hooks.patch | deps
	@mkdir -p $(B)
	sh scripts/get-qemu.sh $(SRC) $(MESONDIR)
	cd $(SRC) && patch -p1 -s < $(TOP)/scripts/qemu-hooks.patch
	@touch $@

$(CONFIGURED): $(B)/source.stamp scripts/configure.sh
	sh scripts/overlay.sh $(TOP) $(SRC)
	sh scripts/configure.sh $(SRC) $(BLD)
	@touch $@

build: $(CONFIGURED)
	@sh scripts/overlay.sh $(TOP) $(SRC)
	ninja -C $(BLD) $(TARGETS) $(addprefix tests/unit/,$(DRBD_UNIT_TESTS))
	@echo "built $$($(BLD)/qemu-img --version | head -n 1)"

DRBD_UNIT_TESTS = $(patsubst tests/unit/%.c,%,$(wildcard tests/unit/test-drbd-*.c))

demo: build
	python3 scripts/demo.py $(BLD)

check: build
	sh scripts/check.sh $(BLD) $(DRBD_UNIT_TESTS)

check-qemu: build
	sh scripts/check-qemu.sh $(BLD)

check-ha: deps
	python3 tests/ha/test-pacemaker-harness.py $(HA_ARGS)

# A directory on a real disk, for the O_DIRECT series of make bench
BENCH_DISK_DIR ?= /var/tmp

bench: build
	python3 tests/bench/drbd-bench.py $(BLD)
	python3 tests/bench/drbd-bench.py $(BLD) --disk-latency-ns 100000 --iothreads
	python3 tests/bench/drbd-bench.py $(BLD) --read --kinds nbd-forward,drbd-C,drbd-C-diskless,drbd-C-remote,drbd-C-rr,drbd-C-least,drbd-C-target
	python3 tests/bench/drbd-bench.py $(BLD) --disk-dir $(BENCH_DISK_DIR)
	python3 tests/bench/drbd-resync-bench.py $(BLD)
	python3 tests/bench/drbd-resync-bench.py $(BLD) --pace
	python3 tests/bench/drbd-mem-bench.py $(BLD)
	python3 tests/bench/drbd-congestion-bench.py $(BLD)

FUZZ_SECONDS ?= 60

fuzz: build
	@sh scripts/fuzz.sh deps
	sh scripts/fuzz.sh build $(SRC) $(BLD) $(B)/fuzz
	sh scripts/fuzz.sh run $(B)/fuzz $(FUZZ_SECONDS)

mutate: build
	python3 scripts/mutate.py --build $(BLD) $(MUTATE_ARGS)

# qemu-drbdadm and an example resource file (docs/system/drbd-adm.rst),
# and the Pacemaker resource agent ocf:qemu-drbd:drbd where Pacemaker
# looks for agents (docs/system/drbd-pacemaker.rst): OCF_ROOT is
# /usr/lib/ocf whatever PREFIX is
OCF_ROOT ?= /usr/lib/ocf
install-tools:
	install -D -m 755 tools/qemu-drbdadm $(DESTDIR)$(PREFIX)/sbin/qemu-drbdadm
	install -D -m 644 tools/r0.res.example $(DESTDIR)$(PREFIX)/share/doc/qemu-drbd/r0.res.example
	install -D -m 755 tools/ocf/drbd $(DESTDIR)$(OCF_ROOT)/resource.d/qemu-drbd/drbd
	install -D -m 755 tools/qemu-drbd-libvirt-hook $(DESTDIR)$(PREFIX)/libexec/qemu-drbd/libvirt-hook

# The binaries are copied, not installed by meson: `meson install` installs
# everything of QEMU's default target (more helpers, keymaps, icons, ...),
# which we do not build, and only to the prefix given at configure time,
# which is compiled in (a new one recompiles all of QEMU).  QEMU is
# relocatable: a binary in $(PREFIX)/bin finds its data relative to
# itself, and the firmware (and the keymaps VNC needs) in the absolute
# --firmwarepath of scripts/configure.sh, Debian's packages.
# The unit's /usr/local paths become $(PREFIX)'s.
SYSTEMD_UNIT_DIR ?= $(PREFIX)/lib/systemd/system
install: build install-tools
	install -d $(DESTDIR)$(PREFIX)/bin
	install -m 755 $(addprefix $(BLD)/,$(TARGETS)) $(DESTDIR)$(PREFIX)/bin/
	install -d $(DESTDIR)$(SYSTEMD_UNIT_DIR)
	sed 's|/usr/local/|$(PREFIX)/|g' tools/systemd/qemu-drbd@.service \
	    > $(DESTDIR)$(SYSTEMD_UNIT_DIR)/qemu-drbd@.service
	chmod 644 $(DESTDIR)$(SYSTEMD_UNIT_DIR)/qemu-drbd@.service

clean:
	rm -rf $(BLD) $(CONFIGURED)

distclean:
	rm -rf $(B)
