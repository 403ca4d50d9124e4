/* SPDX-License-Identifier: MIT */
/*
 * Controller hand-over for upgrades: a running kvspliced listens on a Unix
 * socket (--handover-socket); a new one started with --takeover connects,
 * and the old one passes it every socket it holds (SCM_RIGHTS) with what it
 * knows of each, then exits without touching the pinned maps. The kernel
 * keeps splicing established connections meanwhile. This file is the
 * messages and their transport; handover.c says what is sent and when.
 *
 * Messages (SOCK_SEQPACKET, each at most KVS_HO_MSG_MAX bytes), all
 * starting with struct kvs_ho_hdr:
 *   new -> old  HELLO   asks for the sockets
 *   old -> new  STATE   counts, counters, the backend slots (the new one
 *                       takes them as they are, then applies its own list)
 *   old -> new  CONNS   up to KVS_HO_BATCH struct kvs_ho_conn, one fd each
 *   old -> new  BYTES   bytes a controller socket had read and not handled
 *   old -> new  DONE    the old one has let go of the pin directory
 *   new -> old  ACK     the new one runs: the old one exits
 */
#ifndef KVS_HANDOVER_MSG_H
#define KVS_HANDOVER_MSG_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define KVS_HO_MAGIC 0x4b565348u /* "KVSH" */
/* 3: the maps of 2026-12-01 (placement fields in backends, the reports
 * ring), which a controller of version 2 pinned without: no take-over
 * across them. 4: each client's controller budget in its conns entry, and
 * the counters of it (2026-12-02). 5: backends' count of unexpected hits
 * (the index's growth), routes carrying their tenant and the route_shares
 * map (2026-12-02, later). 6: each route's hot window and each backend's
 * record of the fleet's (include/kvsplice/place.h, "Hot prefixes"). 7:
 * the controller's count of its own hot-prefix decisions (ctl_stats),
 * each backend's last health PONG the kernel passed up (pong_seen) and
 * the controller's count of checks held for one (health_held). 8:
 * health_held moved last in ctl_stats (e4fca92): the map's value size is
 * the same, so a take-over across it read health_held as user_path_frames
 * and each counter after it as the one before. 9: each route's hot
 * replicas (kvs_route.replicas, 2026-12-02): the routes map's value grew.
 * 10: the chain map holds a slot per verdict nested on a CPU (its entries
 * from 1 to KVS_NEST), the nest map (pinned) counts the verdicts running,
 * the stats map's value counts the nested ones (2026-12-03).
 * tests/unit/test_ho_layout.c holds each version's layout of the maps'
 * values and, from 10, their shapes. */
#define KVS_HO_VERSION 10
#define KVS_HO_MSG_MAX 65536
#define KVS_HO_BATCH 200 /* fds per message (the kernel allows 253) */

enum kvs_ho_type {
	KVS_HO_HELLO = 1,
	KVS_HO_STATE = 2,
	KVS_HO_CONNS = 3,
	KVS_HO_BYTES = 4,
	KVS_HO_DONE = 5,
	KVS_HO_ACK = 6,
};

struct kvs_ho_hdr {
	uint32_t magic, version, type, n; /* n: entries or bytes that follow */
};

/* A socket handed over: role as in the conns map, or one of these. */
#define KVS_HO_LISTEN 200	/* the listening socket */
#define KVS_HO_INJECT_WRITE 201 /* the controller's end of the inject pair */
#define KVS_HO_METRICS 202	/* --metrics' listening socket */
#define KVS_HO_IN_MAP 1u	/* flags: it is in the SOCKHASH */
#define KVS_HO_HALF_CLOSED 2u	/* a client that sent FIN */

/* A backend slot as the old controller had it. */
#define KVS_HO_BE_PRESENT 1u
#define KVS_HO_BE_DRAINING 2u
#define KVS_HO_BE_REMOVING 4u
/* Its last PONG said its server cannot serve (KVS_BE_NOT_READY): kept out
 * of new work by the successor too, not published up until its first
 * PONG. A controller that does not know the bit ignores it. */
#define KVS_HO_BE_NOT_READY 8u
/* Its backend_ttft entry holds its own counts: the sender counted them
 * (a controller of 00bfb01 on). One of before neither counts nor clears
 * them, but leaves the map pinned as a later one left it (its pin list
 * does not name it): without the bit the successor clears the entry, an
 * earlier run's counts, perhaps of another backend. */
#define KVS_HO_BE_TTFT 16u
struct kvs_ho_backend {
	char name[64]; /* ADDR:PORT */
	uint32_t flags;
	/* The instance its PONGs last said (struct gw_backend): once padding,
	 * which every controller before it zeroed, so 0 (not known: its next
	 * PONG is not compared) from one of those; one of those ignores it.
	 * No version bump. */
	uint32_t instance;
};

struct kvs_ho_conn {
	uint32_t role, backend, slot, flags;
	uint64_t cookie, key;
};

/* Listening socket at path (replacing a stale one), mode 0600. fd or -errno. */
int kvs_ho_listen(const char *path);
/* Connected socket, or -errno. */
int kvs_ho_connect(const char *path);
/* One message with its fds. 0 or -errno. */
int kvs_ho_send(int sock, const void *msg, size_t len, const int *fds, int nfds);
/* One message (waits at most timeout_ms): its length, its fds in fds[0..
 * *nfds) (at most maxfds; the rest closed), or -errno (-ETIMEDOUT). */
ssize_t kvs_ho_recv(int sock, void *buf, size_t cap, int *fds, int *nfds, int maxfds,
		    int timeout_ms);

#endif
