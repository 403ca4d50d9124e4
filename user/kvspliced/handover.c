// SPDX-License-Identifier: MIT
/*
 * Hand-over: a controller gives every socket, with what it knows of each,
 * to a successor that connected to its hand-over socket, lets go of the pin
 * directory, and exits once the successor runs; the successor adopts them.
 * The kernel keeps splicing established connections meanwhile.
 */
#include "handover.h"

#include <bpf/bpf.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "control.h"
#include "client.h"
#include "conn.h"
#include "kpath.h"
#include "kvsplice/hash.h"
#include "log.h"
#include "loop.h"
#include "pins.h"
#include "sdnotify.h"
#include "sendq.h"
#include "upgrade.h"

static int arm_handover(struct gw *g)
{
	struct io_uring_sqe *sqe;

	if (g->ho_fd < 0)
		return 0;
	sqe = gw_get_sqe(g);
	if (!sqe)
		return -EBUSY;
	io_uring_prep_poll_add(sqe, g->ho_fd, POLLIN);
	io_uring_sqe_set_data64(sqe, ud(OP_HANDOVER, NULL));
	return 0;
}

int gw_handover_listen(struct gw *g)
{
	int err = kvs_mkdir_parent(g->ho_path);

	g->ho_fd = err ? err : kvs_ho_listen(g->ho_path);
	if (g->ho_fd < 0) {
		err = g->ho_fd;
		pr_warn("event=handover_socket_failed path=%s err=\"%s\"", g->ho_path,
			strerror(-err));
		return err;
	}
	/* Not armed (a full ring): no successor can take over until a
	 * restart, but this controller serves. */
	if (arm_handover(g))
		pr_warn("event=handover_arm_failed");
	return 0;
}

/* Reaps completions until nothing can still read from a socket we hand
 * over or write into the inject socket behind our back: the accept and the
 * controller sockets' recvs cancelled, the last send done. */
static int quiesce(struct gw *g)
{
	struct io_uring_sqe *sqe;
	struct gw_conn *rd[2] = { g->punt, g->inject };
	uint64_t deadline = kvs_now_ns() + 5000000000ull;
	int i;

	g->quiescing = true;
	if (g->accepting && (sqe = gw_get_sqe(g))) {
		io_uring_prep_cancel64(sqe, ud(OP_ACCEPT, NULL), 0);
		io_uring_sqe_set_data64(sqe, ud(OP_CANCEL, NULL));
	}
	for (i = 0; i < 2; i++) {
		if (rd[i] && rd[i]->recv_pending && (sqe = gw_get_sqe(g))) {
			io_uring_prep_cancel64(sqe, ud(OP_RECV, rd[i]), 0);
			io_uring_sqe_set_data64(sqe, ud(OP_CANCEL, NULL));
		}
	}
	while (g->accepting || g->inject_q.pending || (g->punt && g->punt->recv_pending) ||
	       (g->inject && g->inject->recv_pending)) {
		struct __kernel_timespec ts = { .tv_nsec = 100000000 };
		struct io_uring_cqe *cqe;

		if (kvs_now_ns() > deadline)
			return -ETIMEDOUT;
		if (io_uring_submit_and_wait_timeout(&g->ring, &cqe, 1, &ts, NULL) < 0)
			continue;
		while (io_uring_peek_cqe(&g->ring, &cqe) == 0) {
			gw_loop_dispatch(g, cqe);
			io_uring_cqe_seen(&g->ring, cqe);
		}
	}
	/* What is still queued for the inject socket goes now, in order. */
	kvs_set_nonblock(g->inject_fd, 0);
	return gw_sendq_flush_sync(&g->inject_q, g->inject_fd);
}

static int send_bytes(int s, uint32_t which, const struct kvs_buf *b)
{
	size_t off = 0, room = KVS_HO_MSG_MAX - sizeof(struct kvs_ho_hdr) - 4;
	uint8_t *msg = malloc(KVS_HO_MSG_MAX);
	int err = msg ? 0 : -ENOMEM;

	while (!err && off < b->len) {
		size_t n = b->len - off < room ? b->len - off : room;
		struct kvs_ho_hdr h = { KVS_HO_MAGIC, KVS_HO_VERSION, KVS_HO_BYTES, (uint32_t)n };

		memcpy(msg, &h, sizeof(h));
		memcpy(msg + sizeof(h), &which, 4);
		memcpy(msg + sizeof(h) + 4, kvs_buf_head(b) + off, n);
		err = kvs_ho_send(s, msg, sizeof(h) + 4 + n, NULL, 0);
		off += n;
	}
	free(msg);
	return err;
}

/* The sockets that go to the new controller (scrapes in progress do not). */
static bool handed(const struct gw_conn *c)
{
	/* The userspace path's connections are not handed over (their
	 * buffers and requests in flight live in this process): they close
	 * with it. docs/RUNBOOK.md says so. */
	return c && !c->closing && c->role != ROLE_METRICS && c->role != ROLE_CONTROL &&
	       c->role != ROLE_CANCEL && !c->up &&
	       !c->probing && /* (its backend reconnects on the other side) */
	       !c->lingering; /* (out of the SOCKHASH, told, closing: closes here) */
}

/* The STATE message. */
struct kvs_ho_state {
	struct kvs_ho_hdr h;
	struct kvs_ctl_stats ctl;
	uint32_t nslots;
	/* KVS_HASH_VERSION of the sender; 0 from one built before the field
	 * (hash version 1) */
	uint32_t hash_version;
	struct kvs_ho_backend be[KVS_MAX_BACKENDS];
};

/* Everything the new controller needs, in the order it needs it. */
static int give_state(struct gw *g, int s)
{
	struct {
		struct kvs_ho_hdr h;
		struct kvs_ho_conn c[KVS_HO_BATCH];
	} batch;
	struct kvs_ho_state st;
	int fds[KVS_HO_BATCH], nf = 0, err;
	uint32_t i;

	memset(&st, 0, sizeof(st));
	st.h = (struct kvs_ho_hdr){ KVS_HO_MAGIC, KVS_HO_VERSION, KVS_HO_STATE, 0 };
	st.ctl = g->ctl;
	st.nslots = g->nslots;
	st.hash_version = KVS_HASH_VERSION;

	for (i = 0; i < g->nslots; i++) {
		const struct gw_backend *be = &g->be[i];

		if (!be->present)
			continue;
		snprintf(st.be[i].name, sizeof(st.be[i].name), "%s", be->name);
		st.be[i].flags = KVS_HO_BE_PRESENT | (be->draining ? KVS_HO_BE_DRAINING : 0) |
				 (be->removing ? KVS_HO_BE_REMOVING : 0) |
				 (be->said_not_ready ? KVS_HO_BE_NOT_READY : 0) | KVS_HO_BE_TTFT;
		st.be[i].instance = be->instance;
	}

	for (i = 0; i < g->conns_cap; i++)
		st.h.n += handed(g->conns[i]);
	/* the listening socket, the inject pair's writing end, --metrics' */
	st.h.n += 2 + (g->metrics_fd >= 0);
	err = kvs_ho_send(s, &st, sizeof(st), NULL, 0);
	batch.h = (struct kvs_ho_hdr){ KVS_HO_MAGIC, KVS_HO_VERSION, KVS_HO_CONNS, 0 };
	for (i = 0; !err && i < g->conns_cap + 3; i++) {
		struct kvs_ho_conn *r = &batch.c[nf];
		struct gw_conn *c = i < g->conns_cap ? g->conns[i] : NULL;

		memset(r, 0, sizeof(*r));
		if (i == g->conns_cap) {
			r->role = KVS_HO_LISTEN;
			fds[nf] = g->listen_fd;
		} else if (i == g->conns_cap + 1) {
			r->role = KVS_HO_INJECT_WRITE;
			fds[nf] = g->inject_fd;
		} else if (i == g->conns_cap + 2 && g->metrics_fd >= 0) {
			r->role = KVS_HO_METRICS;
			fds[nf] = g->metrics_fd;
		} else if (i < g->conns_cap && handed(c)) {
			*r = (struct kvs_ho_conn){ .role = c->role,
						   .backend = c->backend,
						   .slot = c->slot,
						   .cookie = c->cookie,
						   .key = c->key };
			r->flags = (c->in_map ? KVS_HO_IN_MAP : 0) |
				   (c->half_closed ? KVS_HO_HALF_CLOSED : 0);
			fds[nf] = c->fd;
		} else {
			r = NULL; /* nothing in this slot */
		}
		if (r)
			nf++;
		/* A full batch, or the last one (whatever the last slot held). */
		if (nf && (nf == KVS_HO_BATCH || i + 1 == g->conns_cap + 3)) {
			batch.h.n = (uint32_t)nf;
			err = kvs_ho_send(s, &batch,
					  sizeof(batch.h) + sizeof(batch.c[0]) * (size_t)nf, fds,
					  nf);
			nf = 0;
		}
	}
	if (!err && g->punt)
		err = send_bytes(s, 0, &g->punt->rx);
	if (!err && g->inject)
		err = send_bytes(s, 1, &g->inject->rx);
	return err;
}

/*
 * A new controller connected: if it speaks this hand-over version, hand it
 * every socket and the backend slots and let go of the pin directory, then
 * wait for it to say it runs; the loop then ends without closing a socket
 * or touching a map. If it never says so, carry on as before.
 */
static void give_over(struct gw *g, int s)
{
	struct kvs_ho_hdr hello, done = { KVS_HO_MAGIC, KVS_HO_VERSION, KVS_HO_DONE, 0 }, ack;
	int fds[1], nf, err = 0;
	ssize_t n = kvs_ho_recv(s, &hello, sizeof(hello), fds, &nf, 0, 5000);

	if (n < (ssize_t)sizeof(hello) || hello.magic != KVS_HO_MAGIC ||
	    hello.type != KVS_HO_HELLO) {
		pr_warn("event=handover_refused reason=\"not a hand-over request\"");
		return;
	}
	if (hello.version != KVS_HO_VERSION || g->dp.in_memory) {
		struct kvs_ho_hdr no = { KVS_HO_MAGIC, KVS_HO_VERSION, KVS_HO_STATE, UINT32_MAX };

		if (g->dp.in_memory)
			pr_warn("event=handover_refused reason=\"running without BPF: nothing "
				"pinned to hand over\"");
		else
			pr_warn("event=handover_refused reason=\"hand-over version %u, this one "
				"speaks %u\"",
				hello.version, KVS_HO_VERSION);
		kvs_ho_send(s, &no, sizeof(no), NULL, 0);
		return;
	}
	pr_info("event=handover_start conns_cap=%u", g->conns_cap);
	gw_upgrade_began(g, s);
	err = quiesce(g);
	if (!err)
		err = give_state(g, s);
	if (!err) {
		kvs_adm_close(&g->adm); /* the new controller attaches its own */
		gw_control_close(g);	/* and listens for kvsplicectl */
		kvs_dp_release_lock(&g->dp);
		err = kvs_ho_send(s, &done, sizeof(done), NULL, 0);
	}
	if (!err) {
		n = kvs_ho_recv(s, &ack, sizeof(ack), fds, &nf, 0, 20000);
		err = n == (ssize_t)sizeof(ack) && ack.type == KVS_HO_ACK ? 0 : -ECONNRESET;
	}
	if (!err) {
		struct ucred cr;
		socklen_t crlen = sizeof(cr);

		/* Under systemd, the successor is the service's process now
		 * (said before this one exits, which systemd would take for
		 * the service's end). */
		if (!getsockopt(s, SOL_SOCKET, SO_PEERCRED, &cr, &crlen))
			kvs_sd_notify("MAINPID=%d", (int)cr.pid);
		pr_info("event=handed_over slow_frames=%llu",
			(unsigned long long)g->ctl.slow_frames);
		g->handed_over = true;
		g->dp.handed_over = true;
		return;
	}
	/* The new one never took over: carry on. */
	pr_warn("event=handover_failed err=\"%s\" action=\"carrying on\"", strerror(-err));
	if (g->dp.lock_fd < 0 && kvs_dp_relock(&g->dp))
		pr_warn("event=relock_failed hint=\"another controller may run on this --pin-dir\"");
	if (g->cfg->adm.ifname && !g->adm.skel) {
		struct kvs_adm_opts ao = g->cfg->adm;

		ao.pin_dir = g->cfg->pin_dir;
		ao.port = (uint16_t)kvs_local_port(g->listen_fd);
		if (kvs_adm_open(&g->adm, &ao))
			pr_warn("event=xdp_reattach_failed");
	}
	g->quiescing = false;
	if (g->control_fd < 0 && gw_control_open(g))
		pr_warn("event=control_socket_lost hint=\"kvsplicectl cannot reach this controller "
			"until it restarts\"");
	if (g->punt)
		gw_arm_recv(g, g->punt);
	if (g->inject)
		gw_arm_recv(g, g->inject);
	gw_clients_accept(g);
	kvs_set_nonblock(g->inject_fd, 1);
}

void gw_taken_free(struct gw_taken *t, bool close_fds)
{
	for (uint32_t i = 0; close_fds && i < t->got; i++)
		close(t->fds[i]);
	free(t->recs);
	free(t->fds);
	kvs_buf_free(&t->punt_rx);
	kvs_buf_free(&t->inject_rx);
}

/* Asks the controller at path for its sockets; returns the connected
 * hand-over socket (to send ACK on) or -errno. */
int gw_take_state(const char *path, struct gw_taken *t)
{
	struct kvs_ho_hdr hello = { KVS_HO_MAGIC, KVS_HO_VERSION, KVS_HO_HELLO, 0 };
	uint8_t *msg = malloc(KVS_HO_MSG_MAX);
	int s = kvs_ho_connect(path), err = 0, fds[KVS_HO_BATCH], nf;

	memset(t, 0, sizeof(*t));
	kvs_buf_init(&t->punt_rx, 0);
	kvs_buf_init(&t->inject_rx, 0);
	if (s < 0 || !msg) {
		err = s < 0 ? s : -ENOMEM;
		pr_warn("event=takeover_failed socket=%s err=\"%s\" hint=\"is a kvspliced "
			"running with --handover-socket %s?\"",
			path, strerror(-err), path);
		goto out;
	}
	err = kvs_ho_send(s, &hello, sizeof(hello), NULL, 0);
	while (!err) {
		struct kvs_ho_hdr h;
		ssize_t n = kvs_ho_recv(s, msg, KVS_HO_MSG_MAX, fds, &nf, KVS_HO_BATCH, 30000);

		if (n < (ssize_t)sizeof(h)) {
			err = n < 0 ? (int)n : -EPROTO;
			break;
		}
		memcpy(&h, msg, sizeof(h));
		if (h.magic != KVS_HO_MAGIC || h.version != KVS_HO_VERSION) {
			pr_warn("event=takeover_refused reason=\"the running controller speaks "
				"hand-over version %u, this one %u\" hint=\"restart instead "
				"(docs/RUNBOOK.md, Upgrade)\"",
				h.version, KVS_HO_VERSION);
			err = -EPROTO;
		} else if (h.type == KVS_HO_STATE) {
			struct kvs_ho_state st;

			if (h.n == UINT32_MAX || (size_t)n < sizeof(st)) {
				pr_warn("event=takeover_refused reason=\"the running controller "
					"speaks another hand-over version\"");
				err = -EPROTO;
				break;
			}
			memcpy(&st, msg, sizeof(st));
			t->ctl = st.ctl;
			t->hash_version = st.hash_version ? st.hash_version : 1;
			t->nslots = st.nslots < KVS_MAX_BACKENDS ? st.nslots : KVS_MAX_BACKENDS;
			memcpy(t->be, st.be, sizeof(t->be));
			t->n = h.n;
			t->recs = calloc(h.n, sizeof(*t->recs));
			t->fds = calloc(h.n, sizeof(*t->fds));
			if (!t->recs || !t->fds)
				err = -ENOMEM;
		} else if (h.type == KVS_HO_CONNS) {
			if (!t->recs || (uint32_t)nf != h.n || t->got + h.n > t->n) {
				for (int k = 0; k < nf; k++)
					close(fds[k]);
				err = -EPROTO;
				break;
			}
			memcpy(t->recs + t->got, msg + sizeof(h), sizeof(*t->recs) * h.n);
			memcpy(t->fds + t->got, fds, sizeof(int) * h.n);
			t->got += h.n;
		} else if (h.type == KVS_HO_BYTES) {
			uint32_t which;
			struct kvs_buf *rx;

			memcpy(&which, msg + sizeof(h), 4);
			rx = which ? &t->inject_rx : &t->punt_rx;
			err = kvs_buf_reserve(rx, h.n);
			if (!err) {
				memcpy(kvs_buf_tail(rx), msg + sizeof(h) + 4, h.n);
				kvs_buf_commit(rx, h.n);
			}
		} else if (h.type == KVS_HO_DONE) {
			break;
		} else {
			err = -EPROTO;
		}
	}
	if (!err && t->got != t->n)
		err = -EPROTO;
	if (err && s >= 0)
		pr_warn("event=takeover_failed socket=%s err=\"%s\" got=%u of %u sockets", path,
			strerror(-err), t->got, t->n);
out:
	free(msg);
	if (err) {
		if (s >= 0)
			close(s);
		gw_taken_free(t, true);
		return err;
	}
	return s;
}

static int prefill(struct kvs_buf *rx, const struct kvs_buf *from)
{
	if (!from->len)
		return 0;
	if (kvs_buf_reserve(rx, from->len))
		return -ENOMEM;
	memcpy(kvs_buf_tail(rx), kvs_buf_head(from), from->len);
	kvs_buf_commit(rx, from->len);
	return 0;
}

/* Rebuilds the controller's view of the sockets it took over: they stay in
 * the maps as they are; only the controller's own bookkeeping is new. */
/* A socket of a role this controller does not know (a predecessor's newer
 * kind): watched, and closed when it hangs up, as the old controller did. */
static const struct gw_conn_ops adopted_other = { .on_hangup = gw_conn_drop };

/* An adopted client of the kernel path, or NULL. */
static struct gw_conn *kclient(struct gw *g, uint32_t i)
{
	struct gw_conn *c = g->conns[i];

	return c && c->role == KVS_ROLE_CLIENT && c->in_map && !g->dp.in_memory ? c : NULL;
}

/*
 * A changed --tenant-source list can give an index another tenant's salt.
 * The clients the kernel has bound by an index that changes are first
 * moved to a staging copy of the new salts (entries base + i, past both
 * lists) or to none (unbound now), then entries 1..n written, then every
 * client bound by its new index: at no moment does a client's entry hold
 * another tenant's salt. Returns the first entry not to clear (the
 * staging copy's), or KVS_MAX_TENANTS when nothing was staged.
 */
static uint32_t stage_moving(struct gw *g)
{
	uint32_t i, base = g->tenants.n, moving = 0;
	struct kvs_conn kc;
	int err;

	for (i = 0; i < g->conns_cap; i++) {
		struct gw_conn *c = kclient(g, i);

		if (!c || bpf_map_lookup_elem(g->dp.conns_fd, &c->cookie, &kc) ||
		    !kc.by_role.tenant || kc.by_role.tenant == c->tenant)
			continue;
		moving++;
		if (kc.by_role.tenant > base)
			base = kc.by_role.tenant;
	}
	if (!moving)
		return KVS_MAX_TENANTS;
	err = gw_tenants_stage(&g->tenants, g->dp.tenants_fd, base);
	if (err) {
		pr_warn("event=tenants_not_staged err=\"%s\" clients=%u hint=\"clients whose "
			"tenant index changes may be sent with the salt their old index gets, until "
			"they are bound anew (milliseconds)\"",
			strerror(-err), moving);
		return KVS_MAX_TENANTS;
	}
	for (i = 0; i < g->conns_cap; i++) {
		struct gw_conn *c = kclient(g, i);

		if (c && !bpf_map_lookup_elem(g->dp.conns_fd, &c->cookie, &kc) &&
		    kc.by_role.tenant && kc.by_role.tenant != c->tenant)
			kvs_dp_client_bind(&g->dp, c->cookie, kc.limit,
					   c->tenant ? base + c->tenant : 0);
	}
	pr_info("event=tenants_staged clients=%u entries=%u-%u", moving, base + 1,
		base + g->tenants.n);
	return base + 1;
}

/* This configuration's tenants and limits into the kernel's maps, once
 * nothing can make the adoption fail: until then the old controller may
 * carry on, its clients bound by its own tenant indices. */
static void rebind_clients(struct gw *g)
{
	uint32_t keep = g->dp.in_memory ? KVS_MAX_TENANTS : stage_moving(g);
	int err = gw_tenants_publish_below(&g->tenants, g->dp.tenants_fd, keep);

	if (err)
		pr_warn("event=tenants_failed err=\"%s\"", strerror(-err));
	for (uint32_t i = 0; i < g->conns_cap; i++) {
		struct gw_conn *c = kclient(g, i);

		if (c && kvs_dp_client_bind(&g->dp, c->cookie, c->max_inflight, c->tenant))
			pr_warn("event=client_rebind_failed conn=%llu",
				(unsigned long long)c->cookie);
	}
	/* The staging copy cleared (what its clients sent meanwhile is not
	 * counted in their tenant's entry). */
	if (keep < KVS_MAX_TENANTS && (err = gw_tenants_publish(&g->tenants, g->dp.tenants_fd)))
		pr_warn("event=tenants_failed err=\"%s\"", strerror(-err));
}

int gw_adopt(struct gw *g, struct gw_taken *t)
{
	const struct gw_conn_ops *ops;
	uint32_t i;

	for (i = 0; i < t->n; i++) {
		const struct kvs_ho_conn *r = &t->recs[i];
		struct gw_conn *c;

		if (r->role == KVS_HO_LISTEN) {
			g->listen_fd = t->fds[i];
			continue;
		}
		if (r->role == KVS_HO_INJECT_WRITE) {
			g->inject_fd = t->fds[i];
			kvs_set_nonblock(g->inject_fd, 1);
			continue;
		}
		if (r->role == KVS_HO_METRICS) {
			g->metrics_fd = t->fds[i];
			continue;
		}
		ops = gw_kpath_conn_ops(r->role);
		c = gw_conn_new(g, t->fds[i], r->role, ops ? ops : &adopted_other);
		if (!c)
			return -ENOMEM;
		c->key = r->key;
		c->backend = r->backend;
		c->slot = r->slot;
		c->in_map = r->flags & KVS_HO_IN_MAP;
		c->half_closed = r->flags & KVS_HO_HALF_CLOSED;
		if (c->half_closed)
			c->half_close_deadline_ns = kvs_now_ns() + HALF_CLOSE_MAX_MS * 1000000ull;
		switch (r->role) {
		case KVS_ROLE_CLIENT:
			/* The map keeps the old configuration's limit and tenant
			 * until the adoption is certain (rebind_clients). */
			gw_client_bind(g, c);
			if (kvs_idmap_put(&g->clients, c->cookie, c))
				return -ENOMEM;
			break;
		case KVS_ROLE_UPSTREAM:
			if (c->backend >= g->nslots || !g->be[c->backend].present ||
			    c->slot >= KVS_MAX_POOL)
				return -EPROTO;
			g->be[c->backend].pool[c->slot] = c;
			g->be[c->backend].up = true;
			break;
		case KVS_ROLE_INJECT:
			g->inject = c;
			if (prefill(&c->rx, &t->inject_rx))
				return -ENOMEM;
			break;
		case KVS_ROLE_PUNT:
			g->punt_k = c;
			break;
		case ROLE_PUNT_READER:
			g->punt = c;
			if (prefill(&c->rx, &t->punt_rx))
				return -ENOMEM;
			break;
		}
	}
	if (g->listen_fd < 0 || g->inject_fd < 0 || !g->inject || !g->punt || !g->punt_k)
		return -EPROTO;
	rebind_clients(g);
	g->ctl = t->ctl;
	/* Routes keyed by another version's hashes would never match one
	 * again: only take room in the map. The slow path learns them anew. */
	/* (the tenants' counts of them: a successor's first tick recounts,
	 * gw_shares_tick) */
	if (t->hash_version != KVS_HASH_VERSION)
		pr_info("event=routes_flushed reason=\"prefix hash version %u, this one %u\" "
			"routes=%ld",
			t->hash_version, KVS_HASH_VERSION, kvs_routes_clear(g->dp.routes_fd, NULL));
	return 0;
}

/* Once the old controller has been told we run (and not before: until
 * then it may still carry on, and nothing may be read from or written to
 * the sockets we share): watch them as before - the controller's pairs
 * read, the rest polled for hang-ups (a half-closed client on the tick) -
 * and handle the frames the old one had read and not handled. */
int gw_start_adopted(struct gw *g)
{
	/* First the frames already read, then the reads armed: a receive is
	 * aimed at the buffer's tail as it is when armed, and handling what
	 * is buffered moves the tail (an emptied buffer starts over). */
	gw_kpath_drain(g);
	for (uint32_t i = 0; i < g->conns_cap; i++) {
		struct gw_conn *c = g->conns[i];

		if (!c)
			continue;
		if (c->role == KVS_ROLE_INJECT || c->role == ROLE_PUNT_READER) {
			if (gw_arm_recv(g, c))
				return -EBUSY;
		} else if (!c->half_closed && gw_arm_watch(g, c)) {
			return -EBUSY;
		}
	}
	return 0;
}

/* A controller wants to take over. The hand-over itself runs from the main
 * loop between batches of completions (run_handover()), never from inside
 * one: it reaps completions itself, and two readers of the completion
 * queue would each move its head. */
void gw_handover_on_poll(struct gw *g, struct io_uring_cqe *cqe)
{
	int res = cqe->res, s;

	if (res > 0 && g->ho_pending < 0 && (s = accept4(g->ho_fd, NULL, NULL, SOCK_CLOEXEC)) >= 0)
		g->ho_pending = s;
	else
		arm_handover(g);
}

void gw_handover_run(struct gw *g)
{
	int s = g->ho_pending;

	g->ho_pending = -1;
	give_over(g, s);
	close(s);
	if (!g->handed_over)
		arm_handover(g);
}
