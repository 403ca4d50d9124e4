/* SPDX-License-Identifier: MIT */
/*
 * A backend's queued answers put in the order the gateway's kernel path
 * redirects best: each client's together.
 */
#ifndef KVS_FRAMEORDER_H
#define KVS_FRAMEORDER_H

#include <stddef.h>
#include <stdint.h>

/*
 * Reorders the whole KVS1 frames in p[0..len) by their gw_conn, stably:
 * each client's frames back to back, in the order they were queued (so a
 * request's CHUNKs and its END keep theirs), the clients in gw_conn order.
 * The gateway's verdict redirects a client's frames that arrive back to
 * back in one message (bpf/datapath/response.bpf.h, response_run); frames
 * of different requests may go in any order. Returns how many frames
 * there are, -EINVAL (p untouched) when p[0..len) is not whole frames, or
 * -ENOMEM.
 */
int kvs_frames_by_client(uint8_t *p, size_t len);

#endif
