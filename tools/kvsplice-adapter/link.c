// SPDX-License-Identifier: MIT
/* The KVS1 side: links accepted from gateways, their frames dispatched. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "adapter.h"
#include "log.h"
#include "netutil.h"

/* A link's send queue may hold this much before the link is given up: a
 * gateway that stops reading for that long is broken. */
#define LINK_TX_CAP (64u << 20)

int link_accept(struct adapter *a)
{
	struct link *l, **nl;
	int fd = accept4(a->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

	if (fd < 0)
		return errno == EAGAIN || errno == EINTR ? 0 : -errno;
	if (a->nlinks == a->links_cap) {
		uint32_t cap = a->links_cap ? a->links_cap * 2 : 8;

		nl = realloc(a->links, cap * sizeof(*nl));
		if (!nl)
			goto fail;
		a->links = nl;
		a->links_cap = cap;
	}
	l = calloc(1, sizeof(*l));
	if (!l)
		goto fail;
	l->fd = fd;
	l->id = ++a->next_link_id;
	l->peer = kvs_peer_host(fd);
	kvs_buf_init(&l->rx, 0);
	kvs_buf_init(&l->tx, LINK_TX_CAP);
	kvs_set_nodelay(fd);
	a->links[a->nlinks++] = l;
	a->stats.links++;
	pr_debug("event=link_up link=%llu", (unsigned long long)l->id);
	return 1;
fail:
	pr_warn("event=accept_failed err=ENOMEM");
	close(fd);
	return -ENOMEM;
}

void link_close(struct adapter *a, struct link *l)
{
	uint32_t i;

	job_drop_link(a, l);
	for (i = 0; i < a->nlinks; i++)
		if (a->links[i] == l) {
			a->links[i] = a->links[--a->nlinks];
			break;
		}
	pr_debug("event=link_down link=%llu", (unsigned long long)l->id);
	close(l->fd);
	kvs_buf_free(&l->rx);
	kvs_buf_free(&l->tx);
	free(l);
}

static void pong(struct adapter *a, struct link *l, const struct kvs_msg *m)
{
	struct kvs_load_info li;

	state_load(a, &li);
	tx_pong(l, m, state_instance(a), &li);
}

/* A protocol violation: ERROR with its code, then the link closes (codes
 * 1-7 mean the stream cannot be trusted past this point). */
static int refuse_frame(struct link *l, const struct kvs_msg *m, int code)
{
	char msg[96];

	snprintf(msg, sizeof(msg), "kvsplice-adapter: %s", kvs_status_name(code));
	tx_frame(l, m, KVS_T_ERROR, (uint16_t)code, msg, (uint32_t)strlen(msg));
	tx_flush(l);
	pr_warn("event=bad_frame link=%llu status=%s", (unsigned long long)l->id,
		kvs_status_name(code));
	return -1;
}

static int on_frames(struct adapter *a, struct link *l)
{
	const uint8_t *frame;
	struct kvs_msg m;
	int r;

	while ((r = kvs_next_frame(&l->rx, a->cfg.max_payload, &m, &frame)) != 0) {
		if (r < 0)
			return refuse_frame(l, &m, -r);
		switch (m.type) {
		case KVS_T_REQUEST:
			job_start(a, l, &m, frame + KVS_HDR_LEN);
			break;
		case KVS_T_CANCEL:
			job_cancel(a, l, &m);
			break;
		case KVS_T_PING:
			pong(a, l, &m);
			break;
		default: /* CHUNK, END, ERROR, PONG: not a client's to send */
			return refuse_frame(l, &m, KVS_E_BAD_TYPE);
		}
		kvs_buf_consume(&l->rx, KVS_HDR_LEN + m.payload_len);
		if (l->dead)
			return -1;
	}
	return 0;
}

int link_on_readable(struct adapter *a, struct link *l)
{
	long n;

	for (;;) {
		n = kvs_buf_recv(&l->rx, l->fd, 64 * 1024);
		if (n == -EAGAIN)
			return 0;
		if (n == 0) { /* a client's half-close: its answers are still owed */
			l->eof = true;
			return 0;
		}
		if (n < 0) /* reset: nobody is left to answer */
			return -1;
		if (on_frames(a, l))
			return -1;
	}
}
