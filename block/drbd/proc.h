/*
 * DRBD-style replicated block device: the /proc/drbd view of a node
 *
 * Pure code: no I/O, no QEMU globals.  HMP "info drbd" shows each node
 * as DRBD 8's /proc/drbd shows a device, so that what reads one reads
 * the other: the names of the states in DRBD's spelling, the protocol's
 * letter, the amounts in KiB.  QMP (query-drbd) keeps QAPI's names and
 * counts bytes.  A node during a resync, for example:
 *
 *   disk0: resource r0, node-id 0
 *    0: cs:SyncSource ro:Primary/Secondary ds:UpToDate/Inconsistent C r-----
 *       ns:5184 nr:0 dw:5184 dr:0 al:2 bm:0 lo:0 pe:2 ... wo:f oos:3072
 *   <tab>[=====>..............] sync'ed: 33.3% (3072/4608)K
 *   <tab>finish: 0:00:12 speed: 61,440 (58,112) want: 102,400 K/sec
 *       uuids: 8E33C2A0A4F1B7D1:0000000000000000:5A45524F45440000:...
 *
 * The first line is ours: the node name, resource and node id.  The next
 * two are /proc/drbd's, field for field.  The number in front is the
 * node's position in the list (/proc/drbd's device minor); of the flags,
 * "r" says I/O is never suspended, the second is "a" while the resync
 * waits for its resync-after node, the fourth "u" while the user pauses
 * the resync's job; "wo:f": the write order is kept with flushes.
 * During a resync or a verify come DRBD's progress bar and the time left
 * at the current speed, the current speed (over the last 8 s or so), the
 * average since the start and, with a resync-rate, the limit ("want"),
 * with "(stalled)" while nothing moves.  The UUIDs and "last error:" are
 * ours.
 * docs/system/drbd.rst shows the same to users.
 *
 * Copyright (c) 2026 The qemu-drbd authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef BLOCK_DRBD_PROC_H
#define BLOCK_DRBD_PROC_H

#include "qapi/qapi-types-drbd.h"

/* DRBD's name of a connection state, e.g. "WFConnection" */
const char *drbd_proc_cstate_name(DrbdConnState cstate);

/* DRBD's name of a role, e.g. "Primary" */
const char *drbd_proc_role_name(DrbdRole role);

/* DRBD's name of a disk state, e.g. "UpToDate", "DUnknown" */
const char *drbd_proc_disk_name(DrbdDiskState disk);

/*
 * Append @info, the node at position @minor in the list, to @out in the
 * layout above, each line ending in a newline
 */
void drbd_proc_format(GString *out, unsigned minor, const DrbdInfo *info);

#endif
