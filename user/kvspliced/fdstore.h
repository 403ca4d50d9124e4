/* SPDX-License-Identifier: MIT */
/*
 * Surviving a crash with systemd's file-descriptor store (sd_notify(3),
 * FDSTORE=1): the controller hands its listening socket, each spliced
 * client and backend connection and the kernel's punt pair to the service
 * manager, which holds a copy of each; a controller that dies (SIGKILL, a
 * crash) then closes nothing, the kernel keeps splicing the established
 * connections through the pinned maps, and the one systemd restarts gets
 * the sockets back (LISTEN_FDS, LISTEN_FDNAMES) and adopts them as a
 * take-over does (handover.c's gw_adopt).
 *
 * Names say what a socket is (FDNAME applies to every descriptor of one
 * datagram, so that hand-ins go in batches, one datagram per kind and tick
 * of up to KVS_SD_FDS_MAX): kvs-listen, kvs-metrics, kvs-client,
 * kvs-upstream, kvs-punt (the kernel's end of the punt pair) and
 * kvs-punt-reader. Which client or backend slot a socket is comes from the
 * socket itself (its cookie) and the pinned conns map, which the kernel
 * keeps. A socket the controller closes is shut down first (conn.c, for
 * those marked fdstored), so that the store's copy hangs up and systemd
 * drops it (it polls what it holds); on a clean stop every name is
 * removed with FDSTOREREMOVE=1.
 */
#ifndef KVS_GW_FDSTORE_H
#define KVS_GW_FDSTORE_H

#include "gw.h"
#include "handover.h"

#define KVS_FDN_LISTEN "kvs-listen"
#define KVS_FDN_METRICS "kvs-metrics"
#define KVS_FDN_CLIENT "kvs-client"
#define KVS_FDN_UPSTREAM "kvs-upstream"
#define KVS_FDN_PUNT "kvs-punt"
#define KVS_FDN_PUNT_READER "kvs-punt-reader"

/* Whether this controller hands its sockets in (--fd-store, and a
 * service manager listening). */
void gw_fdstore_init(struct gw *g);
/* On the tick: the sockets not handed in yet, in batches. */
void gw_fdstore_tick(struct gw *g);
/* The listening or metrics socket (name KVS_FDN_LISTEN or _METRICS)
 * closed for one at another address: the store's copy goes too (it would
 * keep listening at the old one, and come back after a crash); the new
 * one is handed in on the tick. */
void gw_fdstore_drop(struct gw *g, const char *name);
/* A clean stop (not a hand-over): the store emptied. */
void gw_fdstore_clear(struct gw *g);

/* What the service manager passed at start. */
struct gw_stored {
	int *fds;
	char **names;
	int n;
};
/* Takes LISTEN_FDS (closing descriptors that are not ours). Returns 1 if
 * they hold our listening socket and the maps they are in are pinned at
 * pin_dir (a restart after a crash: adopt them), else 0 (nothing to
 * adopt: free s, which shuts them down), or -errno. */
int gw_fdstore_received(struct gw_stored *s, const char *pin_dir);
/* With the pinned maps open: t filled as a hand-over fills it (the
 * backend slots and counters from the maps, one record per socket that
 * the maps still know; the rest shut down), a fresh inject pair (and punt
 * pair, if the kept one is unusable) made, and what waits in the punt
 * socket read, from the first whole frame. s is emptied. 0 or -errno. */
int gw_fdstore_take(struct gw *g, struct gw_stored *s, struct gw_taken *t);
/* After gw_adopt of what gw_fdstore_take gave: those sockets are in the
 * store already (systemd would only compare and drop a second copy); the
 * conns map's entries for sockets that are gone deleted. */
void gw_fdstore_adopted(struct gw *g);
void gw_stored_free(struct gw_stored *s);
/* Where the kept punt stream's next whole frame begins in the len bytes
 * read from it (the dead controller may have read the start of one): the
 * first offset from which whole frames follow to the end (the last may be
 * unfinished), each naming one of the n clients in cookies (sorted) or
 * none (a backend's PONG); len if there is none. */
size_t gw_punt_resync(const uint8_t *p, size_t len, const uint64_t *cookies, size_t n,
		      uint32_t max_payload);

#endif
