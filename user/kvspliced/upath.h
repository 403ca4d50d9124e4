/* SPDX-License-Identifier: MIT */
/*
 * The userspace data path: the controller reads each client's frames,
 * routes them with the same decision, and copies them over upstream
 * connections of its own (no BPF on the way).
 */
#ifndef KVS_GW_UPATH_H
#define KVS_GW_UPATH_H

#include "gw.h"

/* Registered in g->upath at setup. */
extern const struct gw_path_ops gw_upath_ops;

/* A client accepted onto the userspace data path. 0 or -errno. */
int gw_up_client(struct gw *g, struct gw_conn *c);
/* New clients go on the userspace data path (user) or the kernel's; those
 * connected stay on theirs until they close. Switching to user connects
 * the userspace path's upstream pools. 0 or -errno. */
int gw_set_datapath(struct gw *g, bool user);
/* On the tick: sends queued while the submission ring was full retried,
 * and the conns entries whose counts moved rewritten. */
void gw_up_tick(struct gw *g);
/* Clients of the userspace path whose frame began before since_ns and is
 * not complete: answered ERROR timeout and closed. */
void gw_up_stale(struct gw *g, uint64_t since_ns);
/* Clients on each path. */
void gw_up_count(const struct gw *g, uint32_t *kernel, uint32_t *user);
/* Completion handler: OP_CSEND (a send on a connection of this path). */
void gw_up_on_send(struct gw *g, struct io_uring_cqe *cqe);

#endif
