// SPDX-License-Identifier: MIT
/* Clients accepted, each onto the data path new clients take (the kernel's
 * splice or the userspace path); each stays on its path until it closes. */
#include "client.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "conn.h"
#include "kpath.h"
#include "log.h"
#include "loop.h"
#include "upath.h"

int gw_clients_accept(struct gw *g)
{
	int err = gw_arm_accept(g, g->listen_fd, OP_ACCEPT);

	g->accepting = err == 0;
	return err;
}

void gw_client_on_accept(struct gw *g, struct io_uring_cqe *cqe)
{
	struct gw_conn *c;
	int err;

	if (!(cqe->flags & IORING_CQE_F_MORE)) {
		/* Multishot ended (e.g. EMFILE): re-arm it, unless handing over. */
		g->accepting = false;
		if (!g->quiescing)
			gw_clients_accept(g);
	}
	if (cqe->res == -ECANCELED) /* handing over */
		return;
	if (cqe->res < 0) {
		pr_warn("event=accept_failed err=\"%s\"", strerror(-cqe->res));
		return;
	}
	c = gw_conn_new(g, cqe->res, KVS_ROLE_CLIENT, gw_kpath_conn_ops(KVS_ROLE_CLIENT));
	if (!c) {
		close(cqe->res);
		return;
	}
	g->ctl.clients_accepted++;
	gw_client_bind(g, c);
	err = kvs_idmap_put(&g->clients, c->cookie, c);
	if (!err && g->user_path)
		err = gw_up_client(g, c);
	else if (!err)
		err = gw_kpath_client(g, c);
	if (err == -EOPNOTSUPP) {
		/* The kernel splices only established sockets: this client
		 * closed or half-closed before it was accepted. Its request
		 * cannot be spliced; say so, on the socket directly. */
		g->ctl.clients_early_closed++;
		pr_debug("event=client_closed_before_accept conn=%llu",
			 (unsigned long long)c->cookie);
		gw_answer_direct(c->fd, c->cookie, KVS_E_INTERNAL,
				 "kvsplice: connection shut down before the gateway accepted it; "
				 "half-close only after the answer has started");
		gw_conn_close(g, c);
		return;
	}
	if (err) {
		pr_warn("event=client_setup_failed conn=%llu err=\"%s\"",
			(unsigned long long)c->cookie, strerror(-err));
		gw_conn_close(g, c);
		return;
	}
	pr_debug("event=client_accepted conn=%llu fd=%d", (unsigned long long)c->cookie, c->fd);
}
