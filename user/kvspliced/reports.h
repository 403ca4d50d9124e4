/* SPDX-License-Identifier: MIT */
/*
 * The kernel's reports of the requests it sent (the reports ring, written
 * by the verdict's report()): from them the controller keeps its index of
 * what each backend holds, and marks the routes the kernel learned so that
 * they are withdrawn when the index evicts their prefix. No prompt bytes
 * pass through here.
 */
#ifndef KVS_GW_REPORTS_H
#define KVS_GW_REPORTS_H

#include "gw.h"

/* Opens the ring (none on the in-memory data path: then nothing to do).
 * 0 or -errno (logged; the controller runs on without reports). */
int gw_reports_open(struct gw *g);
void gw_reports_close(struct gw *g);
/* Waits for reports: a poll on the ring, its completions OP_REPORTS. */
void gw_reports_arm(struct gw *g);
void gw_reports_on_poll(struct gw *g, struct io_uring_cqe *cqe);
/* Reads every report there is now (the tick calls it too, so a poll lost
 * to a full submission queue delays learning by one tick at most). */
void gw_reports_drain(struct gw *g);

#endif
