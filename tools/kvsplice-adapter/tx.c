// SPDX-License-Identifier: MIT
/* Frames out to a link: queued, then written as the socket takes them. */
#include <errno.h>
#include <sys/socket.h>

#include "adapter.h"
#include "frameorder.h"

static bool put(struct link *l, struct kvs_msg *m, const void *payload, uint32_t len)
{
	if (l->dead)
		return false;
	if (kvs_put_frame(&l->tx, m, payload, len)) {
		/* The peer stopped reading for longer than the cap holds. */
		l->dead = true;
		return false;
	}
	return true;
}

/* A reply's header: what the gateway needs to route it back. */
static struct kvs_msg reply_to(const struct kvs_msg *req, uint8_t type, uint16_t status)
{
	return (struct kvs_msg){
		.type = type,
		.status = status,
		.req_id = req->req_id,
		.gw_conn = req->gw_conn,
		.gw_backend = req->gw_backend,
	};
}

bool tx_frame(struct link *l, const struct kvs_msg *req, uint8_t type, uint16_t status,
	      const void *payload, uint32_t len)
{
	struct kvs_msg m = reply_to(req, type, status);

	return put(l, &m, payload, len);
}

bool tx_pong(struct link *l, const struct kvs_msg *ping, uint32_t instance,
	     const struct kvs_load_info *li)
{
	uint8_t payload[sizeof(struct kvs_load)];
	struct kvs_msg m = reply_to(ping, KVS_T_PONG, 0);

	m.instance = instance;
	kvs_load_encode(li, payload);
	return put(l, &m, payload, sizeof(payload));
}

/* What a turn queued goes out in one write, each client's frames together
 * (kvs_frames_by_client): the gateway redirects a client's frames that
 * arrive back to back at once. Not while a frame is part sent: its rest
 * must go first. */
int tx_flush(struct link *l)
{
	if (!l->tx_cut && l->tx.len > KVS_HDR_LEN)
		kvs_frames_by_client(kvs_buf_head(&l->tx), l->tx.len);
	while (l->tx.len && !l->dead) {
		ssize_t n =
			send(l->fd, kvs_buf_head(&l->tx), l->tx.len, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				break;
			l->dead = true;
			return -1;
		}
		kvs_buf_consume(&l->tx, (size_t)n);
	}
	l->tx_cut = l->tx.len > 0;
	return l->dead ? -1 : 0;
}
