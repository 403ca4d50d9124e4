/* SPDX-License-Identifier: MIT */
/* The control socket: kvsplicectl's commands to a running controller. */
#ifndef KVS_GW_CONTROL_H
#define KVS_GW_CONTROL_H

#include "gw.h"

/* Listens for kvsplicectl at --control-socket (default: by --pin-dir),
 * mode 0600. 0 or -errno: -EADDRINUSE when another controller answers
 * there. */
int gw_control_open(struct gw *g);
/* Stops listening and removes the socket file (a hand-over: the successor
 * listens). */
void gw_control_close(struct gw *g);
/* Completion handler: OP_CONTROL_ACCEPT. */
void gw_control_on_accept(struct gw *g, struct io_uring_cqe *cqe);

#endif
