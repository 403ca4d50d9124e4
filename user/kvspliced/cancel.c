// SPDX-License-Identifier: MIT
/*
 * CANCELs for the requests the gateway ended itself with an ERROR while
 * their backend may still be working on them: it was ejected by a health
 * check (it may only be hung, or cut off), it lost one connection and not
 * the others, or the operator removed it with requests still running. By
 * then its connections are closed and the kernel's records gone, so the
 * CANCELs go on a connection of their own, closed as soon as they are
 * written: a backend finds a request by (gw_conn, req_id) whichever
 * connection the CANCEL arrives on (docs/PROTOCOL.md). What it answers goes
 * where the request's answers went, a connection the gateway has closed, so
 * nothing comes back to release twice.
 */
#include "cancel.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "codec.h"
#include "log.h"

#define CONNECT_TIMEOUT_MS 300 /* as every backend connection (backend.c) */

uint32_t gw_cancel_ended(struct gw *g, uint32_t b, const struct gw_ended *reqs, uint32_t n)
{
	struct gw_backend *be = &g->be[b];
	struct kvs_buf out;
	uint32_t i, written = 0;
	ssize_t w = 0;
	int fd, size;

	if (!n)
		return 0;
	kvs_buf_init(&out, 0);
	for (i = 0; i < n; i++) {
		struct kvs_msg m = { .type = KVS_T_CANCEL,
				     .req_id = reqs[i].req_id,
				     .gw_backend = kvs_gw_pack(b, 0),
				     .gw_conn = reqs[i].client };

		if (kvs_put_frame(&out, &m, NULL, 0))
			break;
	}
	fd = kvs_connect(&be->addr, CONNECT_TIMEOUT_MS);
	if (fd < 0) {
		pr_debug("event=cancels_not_sent backend=%s requests=%u err=\"%s\"", be->name, n,
			 strerror(-fd));
		kvs_buf_free(&out);
		return 0;
	}
	/* All of it into the socket at once, without waiting on the backend
	 * (it may be hung): a buffer that holds it (as root, past wmem_max). */
	size = out.len > (1u << 30) ? 1 << 30 : (int)out.len;
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &size, sizeof(size)))
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof(size));
	w = send(fd, kvs_buf_head(&out), out.len, MSG_DONTWAIT | MSG_NOSIGNAL);
	if (w > 0)
		written = (uint32_t)((size_t)w / KVS_HDR_LEN);
	/* Closed with the CANCELs still queued: TCP sends them, then FIN. */
	close(fd);
	kvs_buf_free(&out);
	g->ctl.cancels_sent += written;
	pr_info("event=cancels_sent backend=%s requests=%u written=%u", be->name, n, written);
	return written;
}
