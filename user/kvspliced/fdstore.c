// SPDX-License-Identifier: MIT
/*
 * The controller's sockets in systemd's file-descriptor store: handed in
 * on the tick, shut down when closed, taken back after a crash (see
 * fdstore.h for the protocol and the names).
 */
#include "fdstore.h"

#include <bpf/bpf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "codec.h"
#include "kpath.h"
#include "kvsplice/hash.h"
#include "log.h"
#include "pins.h"
#include "sdnotify.h"

#define PUNT_READ_MAX (64u << 20) /* what is read of the kept punt socket at once */
#define FIRST_FD 3		  /* SD_LISTEN_FDS_START */

void gw_fdstore_init(struct gw *g)
{
	/* systemd 254 and later say how many it keeps ($FDSTORE): with none,
	 * every hand-in would cost a warning in its journal. 252 says
	 * nothing: the unit's FileDescriptorStoreMax= is trusted. */
	const char *max = getenv("FDSTORE");

	g->fdstore.on = g->cfg->fd_store && kvs_sd_notifying() && !g->dp.in_memory &&
			!(max && strtoul(max, NULL, 10) == 0);
}

/* Descriptors of one name, sent together. */
struct batch {
	const char *name;
	unsigned n;
	int fds[KVS_SD_FDS_MAX];
	struct gw_conn *cs[KVS_SD_FDS_MAX]; /* NULL for the listening sockets */
};

static void flush(struct gw *g, struct batch *b)
{
	int r;

	if (!b->n)
		return;
	r = kvs_sd_store_fds(b->name, b->fds, b->n);
	if (r > 0) {
		for (unsigned i = 0; i < b->n; i++)
			if (b->cs[i])
				b->cs[i]->fdstored = true;
			else if (b->fds[i] == g->listen_fd)
				g->fdstore.listen_in = true;
			else
				g->fdstore.metrics_in = true;
		g->fdstore.fds += b->n;
		g->fdstore.msgs++;
		if (g->fdstore.failing || !g->fdstore.said)
			pr_info("event=fd_store_active fds=%llu datagrams=%llu",
				(unsigned long long)g->fdstore.fds,
				(unsigned long long)g->fdstore.msgs);
		g->fdstore.said = true;
		g->fdstore.failing = false;
		pr_debug("event=fds_stored name=%s n=%u", b->name, b->n);
	} else if (!g->fdstore.failing) {
		/* Retried on the next tick; said once per spell of failures. */
		pr_warn("event=fd_store_failed name=%s n=%u err=\"%s\" hint=\"these sockets "
			"would not survive a crash; is FileDescriptorStoreMax= set?\"",
			b->name, b->n, strerror(r < 0 ? -r : ENOTCONN));
		g->fdstore.failing = true;
	}
	b->n = 0;
}

static void add(struct gw *g, struct batch *b, int fd, struct gw_conn *c)
{
	b->fds[b->n] = fd;
	b->cs[b->n++] = c;
	if (b->n == KVS_SD_FDS_MAX)
		flush(g, b);
}

/* Which batch a connection goes in, if it should be kept: what a restarted
 * controller can adopt (spliced clients and pool connections, the punt
 * pair; not the inject pair, which may hold half a frame, nor the
 * userspace path's, whose state lives in this process). */
static int kind(const struct gw *g, const struct gw_conn *c)
{
	if (!c || c->closing || c->fdstored || c->up || c->probing || c->lingering)
		return -1;
	if (c->role == KVS_ROLE_CLIENT && c->in_map)
		return 0;
	if (c->role == KVS_ROLE_UPSTREAM && c->in_map)
		return 1;
	if (c == g->punt_k)
		return 2;
	if (c == g->punt)
		return 3;
	return -1;
}

void gw_fdstore_tick(struct gw *g)
{
	static struct batch b[4]; /* 4 x 2.4 kB: not on the stack */
	const char *names[4] = { KVS_FDN_CLIENT, KVS_FDN_UPSTREAM, KVS_FDN_PUNT,
				 KVS_FDN_PUNT_READER };
	struct batch one = { 0 };

	if (!g->fdstore.on)
		return;
	if (!g->fdstore.listen_in && g->listen_fd >= 0) {
		one.name = KVS_FDN_LISTEN;
		add(g, &one, g->listen_fd, NULL);
		flush(g, &one);
	}
	if (!g->fdstore.metrics_in && g->metrics_fd >= 0) {
		one.name = KVS_FDN_METRICS;
		add(g, &one, g->metrics_fd, NULL);
		flush(g, &one);
	}
	for (int k = 0; k < 4; k++) {
		b[k].name = names[k];
		b[k].n = 0;
	}
	for (uint32_t i = 0; i < g->conns_cap; i++) {
		int k = kind(g, g->conns[i]);

		if (k >= 0)
			add(g, &b[k], g->conns[i]->fd, g->conns[i]);
	}
	for (int k = 0; k < 4; k++)
		flush(g, &b[k]);
}

void gw_fdstore_drop(struct gw *g, const char *name)
{
	/* Also with --fd-store turned off by this upgrade: the predecessor's
	 * copy would still listen. */
	if (!g->fdstore.on && !kvs_sd_notifying())
		return;
	kvs_sd_store_remove(name);
	if (!strcmp(name, KVS_FDN_LISTEN))
		g->fdstore.listen_in = false;
	else if (!strcmp(name, KVS_FDN_METRICS))
		g->fdstore.metrics_in = false;
}

void gw_fdstore_clear(struct gw *g)
{
	const char *names[] = { KVS_FDN_LISTEN,	  KVS_FDN_METRICS, KVS_FDN_CLIENT,
				KVS_FDN_UPSTREAM, KVS_FDN_PUNT,	   KVS_FDN_PUNT_READER };

	if (!g->fdstore.on)
		return;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		kvs_sd_store_remove(names[i]);
}

/* A kept socket this controller does not adopt: shut down, so the store's
 * copy hangs up too and the peer is not left waiting. */
static void discard(int fd)
{
	shutdown(fd, SHUT_RDWR);
	close(fd);
}

void gw_stored_free(struct gw_stored *s)
{
	for (int i = 0; i < s->n; i++) {
		if (s->fds[i] >= 0)
			discard(s->fds[i]);
		free(s->names[i]);
	}
	free(s->fds);
	free(s->names);
	memset(s, 0, sizeof(*s));
}

int gw_fdstore_received(struct gw_stored *s, const char *pin_dir)
{
	char socks[512];
	char **names;
	int n = kvs_sd_listen_fds(&names), listen = 0;

	memset(s, 0, sizeof(*s));
	if (n <= 0) {
		kvs_sd_names_free(names);
		return n < 0 ? n : 0;
	}
	s->fds = calloc((size_t)n, sizeof(*s->fds));
	s->names = calloc((size_t)n, sizeof(*s->names));
	for (int i = 0; i < n; i++) {
		const char *name = names && names[i] ? names[i] : "unknown";
		int fd = FIRST_FD + i;

		/* Not ours (socket activation, say): left alone, closed. */
		if (!s->fds || !s->names || strncmp(name, "kvs-", 4)) {
			close(fd);
			continue;
		}
		fcntl(fd, F_SETFD, FD_CLOEXEC);
		s->fds[s->n] = fd;
		s->names[s->n] = strdup(name);
		s->n++;
		listen |= !strcmp(name, KVS_FDN_LISTEN);
	}
	kvs_sd_names_free(names);
	if (!s->fds || !s->names) {
		gw_stored_free(s);
		return -ENOMEM;
	}
	pr_info("event=fd_store_received fds=%d ours=%d", n, s->n);
	/* The sockets are in the maps pinned there: without them (removed,
	 * or --pin-dir changed) they cannot be adopted; a fresh start. */
	snprintf(socks, sizeof(socks), "%s/" KVS_MAP_SOCKS, pin_dir);
	if (listen && access(socks, F_OK)) {
		pr_warn("event=fd_store_discarded reason=\"no maps pinned at %s\" "
			"action=\"starting afresh: the kept connections close\"",
			pin_dir);
		return 0;
	}
	return listen;
}

/* The backend slots as the kernel's map has them (the crashed controller
 * kept it current: state, address). */
static void slots_from_map(struct gw *g, struct gw_taken *t)
{
	for (uint32_t b = 0; b < KVS_MAX_BACKENDS; b++) {
		const struct kvs_backend *be = &g->dp.backends[b];
		uint32_t state = __atomic_load_n(&be->state, __ATOMIC_RELAXED);
		struct kvs_ho_backend *r = &t->be[b];

		if (state == KVS_BE_ABSENT || !be->addr.family)
			continue;
		kvs_endpoint_str(&be->addr, r->name, sizeof(r->name));
		r->flags = KVS_HO_BE_PRESENT | (state == KVS_BE_DRAINING ? KVS_HO_BE_DRAINING : 0) |
			   (state == KVS_BE_REMOVING ? KVS_HO_BE_REMOVING : 0) |
			   (state == KVS_BE_NOT_READY ? KVS_HO_BE_NOT_READY : 0) |
			   /* the crashed controller is taken for this build,
			    * which counted them */
			   KVS_HO_BE_TTFT;
		t->nslots = b + 1;
	}
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Whole frames, each naming a client we hold (or none: a backend's PONG),
 * from off to the end of what was read (the last one may be unfinished). */
static bool frames_from(const uint8_t *p, size_t len, size_t off, const uint64_t *cookies, size_t n,
			uint32_t max_payload)
{
	static const uint8_t magic[4] = { KVS_MAGIC >> 24, (KVS_MAGIC >> 16) & 0xff,
					  (KVS_MAGIC >> 8) & 0xff, KVS_MAGIC & 0xff };

	for (;;) {
		size_t left = len - off;
		struct kvs_buf v = { .data = (uint8_t *)p, .off = off, .len = left, .cap = len };
		struct kvs_hdr_raw raw;
		const uint8_t *frame;
		struct kvs_msg m;
		int r;

		/* A header still arriving: as far as it goes, it is one. */
		if (left < KVS_HDR_LEN)
			return !memcmp(p + off, magic, left < 4 ? left : 4);
		kvs_hdr_peek(p + off, &raw);
		if (!raw.magic_ok || raw.payload_len > max_payload ||
		    (raw.gw_conn && !bsearch(&raw.gw_conn, cookies, n, sizeof(uint64_t), cmp_u64)))
			return false;
		r = kvs_next_frame(&v, max_payload, &m, &frame);
		if (r <= 0)
			return r == 0;
		if (!m.gw_conn && m.type != KVS_T_PONG)
			return false;
		off += KVS_HDR_LEN + (size_t)m.payload_len;
	}
}

size_t gw_punt_resync(const uint8_t *p, size_t len, const uint64_t *cookies, size_t n,
		      uint32_t max_payload)
{
	size_t off = 0;

	while (off < len && !frames_from(p, len, off, cookies, n, max_payload))
		off++;
	return off;
}

/*
 * What waits in the kept punt socket: frames the kernel passed up while no
 * controller ran (answered now), after the rest of the one the dead
 * controller may have been reading (its start died with it). The first
 * offset from which whole frames follow to the end is taken as the stream's
 * next frame.
 */
static void read_punt(int fd, struct kvs_buf *rx, const uint64_t *cookies, size_t n,
		      uint32_t max_payload)
{
	size_t off;

	while (rx->len < PUNT_READ_MAX && !kvs_buf_reserve(rx, 65536)) {
		ssize_t got = recv(fd, kvs_buf_tail(rx), kvs_buf_room(rx), MSG_DONTWAIT);

		if (got <= 0)
			break;
		kvs_buf_commit(rx, (size_t)got);
	}
	off = gw_punt_resync(kvs_buf_head(rx), rx->len, cookies, n, max_payload);
	if (off)
		pr_warn("event=punt_resynced skipped_bytes=%zu reason=\"the rest of a frame the "
			"crashed controller was reading\"",
			off);
	kvs_buf_consume(rx, off);
	pr_info("event=punt_kept bytes=%zu", rx->len);
}

/* The record for a kept socket, or false to discard it. */
static bool record(struct gw *g, const char *name, int fd, struct gw_taken *t,
		   uint32_t used[KVS_MAX_BACKENDS], bool punt_ok, struct kvs_ho_conn *r)
{
	struct kvs_conn kc;
	uint64_t cookie;

	memset(r, 0, sizeof(*r));
	if (!strcmp(name, KVS_FDN_LISTEN)) {
		r->role = KVS_HO_LISTEN;
		return true;
	}
	if (!strcmp(name, KVS_FDN_METRICS)) {
		r->role = KVS_HO_METRICS;
		return g->cfg->metrics_set;
	}
	cookie = kvs_sock_cookie(fd);
	if (!cookie || bpf_map_lookup_elem(g->dp.conns_fd, &cookie, &kc) || kc.path)
		return false; /* no longer in the maps */
	r->cookie = cookie;
	r->flags = KVS_HO_IN_MAP;
	if (!strcmp(name, KVS_FDN_CLIENT) && kc.role == KVS_ROLE_CLIENT) {
		__u64 v;

		/* Out of the SOCKHASH with its conns entry kept: the crashed
		 * controller was closing it (a lingering close, conn.c); it is
		 * closed (its requests were cancelled, unless the crash came
		 * before the tick that sends the CANCELs: then they run to
		 * their END). */
		if (bpf_map_lookup_elem(g->dp.socks_fd, &cookie, &v) && errno == ENOENT)
			return false;
		r->role = KVS_ROLE_CLIENT;
		r->key = cookie;
		return true;
	}
	if (!strcmp(name, KVS_FDN_UPSTREAM) && kc.role == KVS_ROLE_UPSTREAM) {
		uint32_t b = kc.by_role.backend;

		if (b >= t->nslots || !(t->be[b].flags & KVS_HO_BE_PRESENT) ||
		    kc.slot >= KVS_MAX_POOL || (used[b] & (1u << kc.slot)))
			return false;
		used[b] |= 1u << kc.slot;
		r->role = KVS_ROLE_UPSTREAM;
		r->backend = b;
		r->slot = kc.slot;
		r->key = kvs_upstream_key(b, kc.slot);
		return true;
	}
	if (punt_ok && !strcmp(name, KVS_FDN_PUNT) && kc.role == KVS_ROLE_PUNT) {
		r->role = KVS_ROLE_PUNT;
		r->key = KVS_PUNT_KEY;
		return true;
	}
	return false;
}

/* cookies[0..*n) (adopted clients) and every other client the conns map
 * still has an entry for: a socket gone while no controller ran. The
 * array grown as needed; NULL on no memory (cookies freed). */
static uint64_t *gone_clients(struct gw *g, uint64_t *cookies, size_t *n)
{
	uint64_t key, next, *prev = NULL;
	size_t cap = *n + 1;
	struct kvs_conn kc;

	qsort(cookies, *n, sizeof(*cookies), cmp_u64);
	for (size_t adopted = *n; bpf_map_get_next_key(g->dp.conns_fd, prev, &next) == 0;) {
		key = next;
		prev = &key;
		if (bpf_map_lookup_elem(g->dp.conns_fd, &key, &kc) || kc.role != KVS_ROLE_CLIENT ||
		    bsearch(&key, cookies, adopted, sizeof(*cookies), cmp_u64))
			continue;
		if (*n == cap) {
			uint64_t *m = realloc(cookies, (cap *= 2) * sizeof(*m));

			if (!m) {
				free(cookies);
				return NULL;
			}
			cookies = m;
		}
		cookies[(*n)++] = key;
	}
	return cookies;
}

int gw_fdstore_take(struct gw *g, struct gw_stored *s, struct gw_taken *t)
{
	uint32_t used[KVS_MAX_BACKENDS] = { 0 }, zero = 0;
	int punt_k = -1, punt_r = -1, err = 0;
	size_t nc = 0;
	uint64_t *cookies = calloc((size_t)s->n + 1, sizeof(*cookies));
	struct kvs_conn kc;
	uint64_t cookie;
	bool punt_ok, listen = false, metrics = false;

	memset(t, 0, sizeof(*t));
	kvs_buf_init(&t->punt_rx, 0);
	kvs_buf_init(&t->inject_rx, 0);
	t->recs = calloc((size_t)s->n + 1, sizeof(*t->recs));
	t->fds = calloc((size_t)s->n + 1, sizeof(*t->fds));
	if (!t->recs || !t->fds || !cookies) {
		err = -ENOMEM;
		goto out;
	}
	t->hash_version = KVS_HASH_VERSION;
	bpf_map_lookup_elem(g->dp.ctl_fd, &zero, &t->ctl);
	slots_from_map(g, t);
	for (int i = 0; i < s->n; i++) {
		if (!strcmp(s->names[i], KVS_FDN_PUNT))
			punt_k = s->fds[i];
		else if (!strcmp(s->names[i], KVS_FDN_PUNT_READER))
			punt_r = s->fds[i];
	}
	cookie = punt_k >= 0 ? kvs_sock_cookie(punt_k) : 0;
	punt_ok = punt_r >= 0 && cookie && !bpf_map_lookup_elem(g->dp.conns_fd, &cookie, &kc) &&
		  kc.role == KVS_ROLE_PUNT;
	for (int i = 0; i < s->n; i++) {
		struct kvs_ho_conn *r = &t->recs[t->n];

		if (punt_ok && s->fds[i] == punt_r) {
			memset(r, 0, sizeof(*r));
			r->role = ROLE_PUNT_READER;
		} else if (!record(g, s->names[i], s->fds[i], t, used, punt_ok, r) ||
			   (r->role == KVS_HO_LISTEN && listen) ||
			   (r->role == KVS_HO_METRICS && metrics)) {
			continue; /* discarded with s */
		}
		if (r->role == KVS_ROLE_CLIENT)
			cookies[nc++] = r->cookie;
		listen |= r->role == KVS_HO_LISTEN;
		metrics |= r->role == KVS_HO_METRICS;
		t->fds[t->n++] = s->fds[i];
		s->fds[i] = -1;
	}
	t->got = t->n;
	/* The clients that went while no controller ran may have punted
	 * frames too: frames all the same, not a break in the stream. */
	cookies = gone_clients(g, cookies, &nc);
	if (!cookies) {
		err = -ENOMEM;
		goto out;
	}
	qsort(cookies, nc, sizeof(*cookies), cmp_u64);
	/* The inject pair is always new: the dead controller may have written
	 * half a frame into the old one, and the kernel would take what we
	 * write next for its rest. (The old one closed with it.) */
	err = gw_kpath_setup_inject(g);
	if (!err && !punt_ok) {
		g->fdstore.fresh_punt = true;
		err = gw_kpath_setup_punt(g);
	}
	if (!err && punt_ok)
		read_punt(punt_r, &t->punt_rx, cookies, nc, g->cfg->max_payload);
	pr_info("event=fd_store_taken sockets=%u clients=%zu backend_slots=%u punt=%s", t->n, nc,
		t->nslots, punt_ok ? "kept" : "new");
out:
	free(cookies);
	gw_stored_free(s);
	return err;
}

/*
 * The conns map's entries no adopted socket matches: sockets gone while no
 * controller ran (a client that reset, whose copy the store dropped; one
 * not yet handed in; the dead controller's inject pair). The kernel
 * removed them from the SOCKHASH as they closed, but their conns entries
 * stay until someone deletes them: each crash would leave more behind.
 */
static void sweep_conns(struct gw *g)
{
	uint64_t *live = calloc(g->conns_cap + 1, sizeof(*live)), *stale = NULL, key, next;
	size_t nlive = 0, nstale = 0, cap = 0;
	uint64_t *prev = NULL;

	if (!live)
		return;
	for (uint32_t i = 0; i < g->conns_cap; i++)
		if (g->conns[i] && g->conns[i]->in_map)
			live[nlive++] = g->conns[i]->cookie;
	qsort(live, nlive, sizeof(*live), cmp_u64);
	while (bpf_map_get_next_key(g->dp.conns_fd, prev, &next) == 0) {
		key = next;
		prev = &key;
		if (bsearch(&key, live, nlive, sizeof(*live), cmp_u64))
			continue;
		if (nstale == cap) {
			uint64_t *n = realloc(stale, (cap = cap ? cap * 2 : 64) * sizeof(*n));

			if (!n)
				break;
			stale = n;
		}
		stale[nstale++] = key;
	}
	for (size_t i = 0; i < nstale; i++)
		bpf_map_delete_elem(g->dp.conns_fd, &stale[i]);
	if (nstale)
		pr_info("event=conns_swept entries=%zu reason=\"sockets gone while no controller "
			"ran\"",
			nstale);
	free(stale);
	free(live);
}

void gw_fdstore_adopted(struct gw *g)
{
	sweep_conns(g);
	g->fdstore.listen_in = g->listen_fd >= 0;
	g->fdstore.metrics_in = g->metrics_fd >= 0;
	for (uint32_t i = 0; i < g->conns_cap; i++) {
		struct gw_conn *c = g->conns[i];

		if (!c || ((c == g->punt || c == g->punt_k) && g->fdstore.fresh_punt))
			continue;
		if (c->role == KVS_ROLE_CLIENT || c->role == KVS_ROLE_UPSTREAM || c == g->punt ||
		    c == g->punt_k)
			c->fdstored = true;
	}
}
