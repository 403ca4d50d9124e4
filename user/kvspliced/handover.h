/* SPDX-License-Identifier: MIT */
/*
 * Hand-over: a controller gives every socket, with what it knows of each,
 * to a successor (an upgrade, a restart without dropping connections); the
 * successor adopts them. The messages are handover_msg.h's.
 */
#ifndef KVS_GW_HANDOVER_H
#define KVS_GW_HANDOVER_H

#include "gw.h"
#include "handover_msg.h"

/* What a controller taking over receives: every socket and its record. */
struct gw_taken {
	struct kvs_ho_conn *recs;
	int *fds;
	uint32_t n, got;
	struct kvs_buf punt_rx, inject_rx;
	struct kvs_ctl_stats ctl;
	uint32_t nslots, hash_version;
	struct kvs_ho_backend be[KVS_MAX_BACKENDS];
};

/* Listens at g->ho_path for a successor. 0 or -errno. */
int gw_handover_listen(struct gw *g);
/* Completion handler: OP_HANDOVER (a successor is connecting). */
void gw_handover_on_poll(struct gw *g, struct io_uring_cqe *cqe);
/* The hand-over to the successor that connected (g->ho_pending), run from
 * the main loop between batches of completions. On success
 * g->handed_over is set; otherwise this controller carries on. */
void gw_handover_run(struct gw *g);

/* Taking over: asks the controller at path for its sockets. Returns the
 * connected hand-over socket (to send ACK on) or -errno. */
int gw_take_state(const char *path, struct gw_taken *t);
void gw_taken_free(struct gw_taken *t, bool close_fds);
/* Rebuilds the controller's view of the sockets taken over: they stay in
 * the maps as they are, but for this configuration's tenants and client
 * limits, written last (on failure the maps are untouched). 0 or -errno. */
int gw_adopt(struct gw *g, struct gw_taken *t);
/* After the ACK: the adopted sockets read or watched again, and the frames
 * the old controller had read handled. 0 or -errno. */
int gw_start_adopted(struct gw *g);

#endif
