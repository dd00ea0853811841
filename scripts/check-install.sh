#!/bin/sh
# The installation, run once (make check): `make install DESTDIR=...`, then
# only what it installed: the files are there, the systemd unit names the
# install's paths (and systemd-analyze verify accepts it, where installed),
# the system emulator lists KVM, finds its firmware and keymaps (a machine
# with a VNC server starts), runs a guest under KVM where /dev/kvm is
# usable, and a replicated pair on loopback: alpha brought up by the
# installed qemu-drbdadm, beta by the unit's own ExecStart= (up
# --foreground, with a NOTIFY_SOCKET as systemd gives it), a write through
# alpha's NBD export with the installed qemu-io, both down (beta by the
# unit's ExecStop=), and the installed qemu-img compare of the two disks.
#
# Prints a TAP line per case ("ok install NAME", "not ok install NAME",
# "ok install NAME # SKIP why") and exits non-zero if one failed.
#
# usage: check-install.sh TOPDIR WORKDIR
set -u

top=$(cd "$1" && pwd)
work=$2
dest=$work/dest
prefix=/usr/local
bin=$dest$prefix/bin
adm=$dest$prefix/sbin/qemu-drbdadm
unit=$dest$prefix/lib/systemd/system/qemu-drbd@.service
log=$work/install.log
failed=0
pids=

ok() {
    echo "ok install $1"
}

not_ok() {
    # not_ok NAME WHY...
    name=$1
    shift
    echo "not ok install $name: $*"
    failed=$((failed + 1))
}

cleanup() {
    for p in $pids; do
        kill -9 "$p" 2>/dev/null
    done
}
trap cleanup EXIT

mkdir -p "$work"
: > "$log"

if make -C "$top" --no-print-directory install DESTDIR="$dest" \
        PREFIX="$prefix" >> "$log" 2>&1; then
    ok make-install
else
    not_ok make-install "make install failed: see $log"
    exit 1
fi

missing=
for f in bin/qemu-system-x86_64 bin/qemu-storage-daemon bin/qemu-img \
         bin/qemu-io bin/qemu-nbd sbin/qemu-drbdadm \
         libexec/qemu-drbd/libvirt-hook lib/systemd/system/qemu-drbd@.service \
         share/doc/qemu-drbd/r0.res.example; do
    [ -f "$dest$prefix/$f" ] || missing="$missing $prefix/$f"
done
[ -x "$dest/usr/lib/ocf/resource.d/qemu-drbd/drbd" ] ||
    missing="$missing /usr/lib/ocf/resource.d/qemu-drbd/drbd"
if [ -z "$missing" ]; then
    ok files
else
    not_ok files "missing:$missing"
fi

# The unit as installed: its programs are the install's
exec_start=$(sed -n 's/^ExecStart=//p' "$unit")
exec_stop=$(sed -n 's/^ExecStop=//p' "$unit")
unit_bindir=$(sed -n 's/^Environment=QEMU_DRBD_BINDIR=//p' "$unit")
if [ "$exec_start" = "$prefix/sbin/qemu-drbdadm up --foreground %i" ] &&
        [ "$exec_stop" = "$prefix/sbin/qemu-drbdadm down %i" ] &&
        [ "$unit_bindir" = "$prefix/bin" ]; then
    ok unit-paths
else
    not_ok unit-paths "ExecStart=$exec_start ExecStop=$exec_stop" \
        "QEMU_DRBD_BINDIR=$unit_bindir"
fi
# systemd-analyze verify: the unit's syntax, and its programs (as under
# DESTDIR: verify --root would want a whole system's units there)
mkdir -p "$work/verify"
sed "s|$prefix/|$dest$prefix/|g" "$unit" > "$work/verify/qemu-drbd@.service"
if ! command -v systemd-analyze >/dev/null 2>&1; then
    echo "ok install unit-verify # SKIP no systemd-analyze"
elif out=$(cd "$work/verify" &&
           systemd-analyze verify "$work/verify/qemu-drbd@.service" 2>&1) &&
        [ -z "$out" ]; then
    ok unit-verify
else
    not_ok unit-verify "systemd-analyze verify: $out"
fi

# A monitor session on stdin: qmp_capabilities, then COMMAND, then quit
qmp_session() {
    printf '%s\n' '{"execute": "qmp_capabilities"}' \
        "{\"execute\": \"$1\"}" '{"execute": "quit"}'
}

if "$bin/qemu-system-x86_64" -accel help 2>&1 | grep -qx kvm; then
    ok accel-kvm
else
    not_ok accel-kvm "-accel help does not list kvm"
fi

# The PC BIOS and option ROMs come from the firmware path, en-us (which
# VNC loads) from its keymaps/: a missing file ends QEMU at once
out=$(qmp_session query-vnc |
      timeout 30 "$bin/qemu-system-x86_64" -S -nodefaults -display none \
          -vnc "unix:$work/vnc.sock" -device virtio-net-pci \
          -qmp stdio 2>&1)
if echo "$out" | grep -q '"enabled": true'; then
    ok firmware-vnc
else
    not_ok firmware-vnc "$(echo "$out" | tail -n 3)"
fi

if [ -r /dev/kvm ] && [ -w /dev/kvm ]; then
    out=$(qmp_session query-kvm |
          timeout 30 "$bin/qemu-system-x86_64" -accel kvm -nodefaults \
              -display none -qmp stdio 2>&1)
    if echo "$out" | grep -q '"enabled": true, "present": true'; then
        ok kvm-guest
    else
        not_ok kvm-guest "$(echo "$out" | tail -n 3)"
    fi
else
    echo "ok install kvm-guest # SKIP /dev/kvm is not usable here"
fi

# A replicated pair on loopback
ports=$(python3 -c '
import socket
socks = [socket.socket() for _ in range(2)]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))')
# shellcheck disable=SC2086
set -- $ports
conf=$work/conf
mkdir -p "$conf"
cat > "$conf/r0.res" <<EOF
[resource]
name = r0
protocol = C
connect-interval = 200
disk-size = 4M

[node alpha]
node-id = 0
address = 127.0.0.1:$1
disk = $work/alpha.img
export = nbd:unix:$work/alpha.nbd

[node beta]
node-id = 1
address = 127.0.0.1:$2
disk = $work/beta.img
EOF

adm_as() {
    # adm_as NODE ARGS...: the installed qemu-drbdadm as NODE
    node=$1
    shift
    QEMU_DRBD_BINDIR=$bin QEMU_DRBD_CONF_DIR=$conf \
        QEMU_DRBD_RUN_DIR=$work/run-$node \
        timeout 60 "$adm" "$@" --node "$node" >> "$log" 2>&1
}

# adm_unit NODE LINE: the unit's command LINE (%i is r0) for NODE, with
# the unit's environment, and the install's paths under DESTDIR
adm_unit() {
    node=$1
    # shellcheck disable=SC2046
    set -- $(echo "$2" | sed 's/%i/r0/g')
    cmd=$dest$1
    shift
    QEMU_DRBD_BINDIR=$dest$unit_bindir QEMU_DRBD_CONF_DIR=$conf \
        QEMU_DRBD_RUN_DIR=$work/run-$node \
        timeout 60 "$cmd" "$@" --node "$node" >> "$log" 2>&1
}

pair() {
    adm_as alpha create-md r0 || return 1
    adm_as beta create-md r0 || return 1
    adm_as alpha up r0 || return 1
    pids="$pids $(cat "$work/run-alpha/r0.pid")"
    # systemd's side of Type=notify: a datagram socket that gets READY=1
    # and MAINPID= once the node answers
    rm -f "$work/notify.sock"
    python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
s.settimeout(60)
print(s.recv(4096).decode())' "$work/notify.sock" > "$work/notify.out" &
    listener=$!
    while [ ! -S "$work/notify.sock" ]; do
        kill -0 "$listener" 2>/dev/null || return 1
        sleep 0.1
    done
    NOTIFY_SOCKET=$work/notify.sock adm_unit beta "$exec_start" || return 1
    wait "$listener" || return 1
    beta=$(cat "$work/run-beta/r0.pid")
    pids="$pids $beta"
    if ! grep -qx 'READY=1' "$work/notify.out" ||
            ! grep -qx "MAINPID=$beta" "$work/notify.out"; then
        echo "notified: $(cat "$work/notify.out"), daemon $beta" >> "$log"
        return 1
    fi
    adm_as alpha wait-connect r0 --timeout 20 || return 1
    adm_as beta wait-connect r0 --timeout 20 || return 1
    adm_as alpha primary r0 || return 1
    timeout 60 "$bin/qemu-io" -f raw -c 'write -P 0x5a 0 1M' \
        -c 'write -P 0xa5 3M 64k' -c flush \
        "nbd+unix:///r0?socket=$work/alpha.nbd" >> "$log" 2>&1 || return 1
    adm_as alpha secondary r0 || return 1
    adm_as alpha down r0 || return 1
    # down returns once the daemon has exited (or is a zombie that its
    # new parent, init, has not reaped yet), and removes its pid file
    adm_unit beta "$exec_stop" || return 1
    [ ! -e "$work/run-beta/r0.pid" ] || return 1
    timeout 60 "$bin/qemu-img" compare -f drbd -F drbd \
        "$work/alpha.img" "$work/beta.img" >> "$log" 2>&1 || return 1
    # and the write is there
    timeout 60 "$bin/qemu-io" -f drbd -c 'read -P 0xa5 3M 64k' \
        "$work/beta.img" >> "$log" 2>&1 || return 1
    ! grep -q 'Pattern verification failed' "$log"
}

if pair; then
    ok replicated-pair
else
    not_ok replicated-pair "see $log"
fi

[ "$failed" = 0 ]
