// SPDX-License-Identifier: MIT
/*
 * The KVS1 side: a few connections to each gateway, shared by every HTTP
 * request (KVS1 is multiplexed by req_id). Connections are made without
 * blocking the loop (a gateway that drops SYNs must not stall the
 * requests going to the others); a link that breaks is reported to
 * calls.c, which answers its requests, and is reconnected every 500 ms
 * until it comes back. TCP keepalive finds a gateway that vanished
 * without a FIN. A gateway that says it closes a link (it is stopping:
 * an ERROR with req_id 0) gets nothing new on it, and the link's sending
 * side shut once its requests are answered: the gateway then closes it
 * having answered every request it got, and it is made anew.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>

#include "front.h"
#include "netutil.h"

#define RETRY_MS 500
#define CONNECT_MS 2000
/* A gateway that refuses requests at once is passed over for 250 ms, then
 * twice as long at each refusal in a row, up to 8 s. */
#define SHUN_FIRST_MS 250
#define SHUN_MAX_SHIFT 5

struct link {
	struct links *ls;
	struct kvs_addr addr;
	const char *name; /* the --gateway it goes to */
	uint32_t gw;	  /* its index in --gateway's order */
	uint32_t slot;
	struct bufferevent *bev; /* NULL while down */
	bool up;		 /* connected (else connecting, while bev is set) */
	uint32_t inflight;
	bool said_down; /* logged, until it is back */
	/* The gateway said it closes this connection (an ERROR with req_id 0:
	 * it is stopping): nothing new goes on it, and once its requests are
	 * answered its sending side is shut (fin_sent), so that the gateway
	 * closes it having read every request; then it is made anew. */
	bool going, fin_sent;
};

/* Another round of connects in RETRY_MS, unless one is due already. */
static void arm_retry(struct links *ls)
{
	struct timeval tv = { 0, RETRY_MS * 1000 };

	if (!evtimer_pending(ls->retry, NULL))
		evtimer_add(ls->retry, &tv);
}

static void link_down(struct link *l, const char *why)
{
	struct links *ls = l->ls;
	bool told = l->going && !l->inflight; /* closed as the gateway said */

	if (!l->bev)
		return;
	bufferevent_free(l->bev);
	l->bev = NULL;
	l->up = false;
	l->going = l->fin_sent = false;
	l->inflight = 0;
	if (told)
		pr_info("event=gateway_link_closed gateway=%s link=%u why=\"as it said it "
			"would (stopping); nothing was in flight\"",
			l->name, l->slot);
	else if (!l->said_down)
		pr_warn("event=gateway_lost gateway=%s link=%u why=\"%s\"", l->name, l->slot, why);
	l->said_down = true;
	ls->on_lost(ls->ctx, l);
	arm_retry(ls);
}

/* A link going away with nothing in flight and nothing left to write:
 * its sending side shut (the gateway's cue to close it). */
static void maybe_fin(struct link *l)
{
	if (!l->going || l->fin_sent || l->inflight || !l->bev ||
	    evbuffer_get_length(bufferevent_get_output(l->bev)))
		return; /* on_write calls again once the output is out */
	shutdown(bufferevent_getfd(l->bev), SHUT_WR);
	l->fin_sent = true;
}

static void on_write(struct bufferevent *bev, void *arg)
{
	(void)bev;
	maybe_fin(arg);
}

/* An ERROR with req_id 0 is about the connection (docs/PROTOCOL.md,
 * "Closing"): the gateway closes it, and answers every request it read
 * until then. */
static void link_told(struct link *l, const struct kvs_msg *m, const uint8_t *msg)
{
	int n = m->payload_len < 200 ? (int)m->payload_len : 200;

	if (!l->going)
		pr_info("event=gateway_closing_link gateway=%s link=%u in_flight=%u why=\"%.*s\"",
			l->name, l->slot, l->inflight, n, (const char *)msg);
	l->going = true;
	maybe_fin(l);
}

/* Every complete frame in the input, to the handler. */
static void on_read(struct bufferevent *bev, void *arg)
{
	struct link *l = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	uint8_t hdr[KVS_HDR_LEN];
	const uint8_t *frame;
	struct kvs_msg m;
	int r;

	while (l->bev && evbuffer_get_length(in) >= KVS_HDR_LEN) {
		evbuffer_copyout(in, hdr, KVS_HDR_LEN);
		r = kvs_hdr_decode(hdr, l->ls->max_frame, &m);
		if (r) {
			char why[96];

			snprintf(why, sizeof(why), "the gateway sent a bad frame (%s)",
				 kvs_status_name(r));
			link_down(l, why);
			return;
		}
		if (evbuffer_get_length(in) < KVS_HDR_LEN + (size_t)m.payload_len)
			return;
		frame = evbuffer_pullup(in, KVS_HDR_LEN + (ssize_t)m.payload_len);

		if (!frame) {
			link_down(l, "out of memory");
			return;
		}
		if (m.type == KVS_T_ERROR && m.req_id == 0) { /* no request's: ids start at 1 */
			link_told(l, &m, frame + KVS_HDR_LEN);
			evbuffer_drain(in, KVS_HDR_LEN + (size_t)m.payload_len);
			continue;
		}
		if ((m.type == KVS_T_END || m.type == KVS_T_ERROR) && l->inflight)
			l->inflight--;
		l->ls->on_frame(l->ls->ctx, l, &m, frame + KVS_HDR_LEN);
		if (l->bev) /* the handler may have lost the link */
			evbuffer_drain(in, KVS_HDR_LEN + (size_t)m.payload_len);
		maybe_fin(l);
	}
}

/* Idle 10 s, then 3 probes 5 s apart: a gateway gone without a FIN (its
 * host down) is found in 25 s, and its requests answered. */
static void keepalive(int fd)
{
	int on = 1, idle = 10, intvl = 5, cnt = 3;

	setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
}

static void on_event(struct bufferevent *bev, short what, void *arg)
{
	struct link *l = arg;

	if (what & BEV_EVENT_CONNECTED) {
		int fd = bufferevent_getfd(bev);

		kvs_set_nodelay(fd);
		keepalive(fd);
		bufferevent_set_timeouts(bev, NULL, NULL);
		l->up = true;
		if (l->said_down)
			pr_info("event=gateway_back gateway=%s link=%u", l->name, l->slot);
		l->said_down = false;
		l->ls->on_ready(l->ls->ctx);
		return;
	}
	if (!l->up) {
		if (!l->said_down)
			pr_warn("event=gateway_down gateway=%s link=%u why=\"%s\" (retrying)",
				l->name, l->slot,
				what & BEV_EVENT_TIMEOUT ? "connect timed out" :
							   strerror(EVUTIL_SOCKET_ERROR()));
		l->said_down = true;
	}
	if (what & BEV_EVENT_EOF)
		link_down(l, "the gateway closed the connection");
	else if (what & (BEV_EVENT_ERROR | BEV_EVENT_TIMEOUT))
		link_down(l, strerror(EVUTIL_SOCKET_ERROR()));
}

/* Starts a connect; it completes (or fails) in on_event. */
static int link_connect(struct link *l)
{
	struct timeval tv = { CONNECT_MS / 1000, (CONNECT_MS % 1000) * 1000 };

	l->bev = bufferevent_socket_new(l->ls->base, -1, BEV_OPT_CLOSE_ON_FREE);
	if (!l->bev)
		return -ENOMEM;
	bufferevent_setcb(l->bev, on_read, on_write, on_event, l);
	bufferevent_set_timeouts(l->bev, NULL, &tv); /* the connect's */
	bufferevent_enable(l->bev, EV_READ | EV_WRITE);
	if (bufferevent_socket_connect(l->bev, (struct sockaddr *)&l->addr.ss, (int)l->addr.len)) {
		bufferevent_free(l->bev);
		l->bev = NULL;
		return -ECONNREFUSED;
	}
	return 0;
}

static void on_retry(evutil_socket_t fd, short what, void *arg)
{
	struct links *ls = arg;
	bool failed = false;
	uint32_t i;

	(void)fd;
	(void)what;
	for (i = 0; i < ls->n; i++) {
		struct link *l = ls->all[i];

		if (l->bev || !link_connect(l))
			continue;
		failed = true;
		if (!l->said_down)
			pr_warn("event=gateway_down gateway=%s link=%u", l->name, l->slot);
		l->said_down = true;
	}
	if (failed)
		arm_retry(ls);
}

int links_open(struct links *ls, struct event_base *base, const struct front_config *cfg)
{
	uint32_t g, k;

	ls->base = base;
	ls->max_frame = cfg->max_frame;
	ls->inflight_cap = cfg->link_inflight;
	ls->n = 0;
	ls->all = calloc((size_t)cfg->ngateways * cfg->links_per_gateway, sizeof(*ls->all));
	ls->gws = calloc(cfg->ngateways, sizeof(*ls->gws));
	ls->ngws = cfg->ngateways;
	ls->retry = evtimer_new(base, on_retry, ls);
	if (!ls->all || !ls->gws || !ls->retry)
		return -ENOMEM;
	for (g = 0; g < cfg->ngateways; g++) {
		struct kvs_addr addr;

		if (kvs_parse_addr(cfg->gateways[g], &addr)) {
			pr_warn("--gateway: '%s' is not ADDR:PORT", cfg->gateways[g]);
			return -EINVAL;
		}
		for (k = 0; k < cfg->links_per_gateway; k++) {
			struct link *l = calloc(1, sizeof(*l));

			if (!l)
				return -ENOMEM;
			l->ls = ls;
			l->addr = addr;
			l->name = cfg->gateways[g];
			l->gw = g;
			l->slot = k;
			ls->all[ls->n++] = l;
		}
	}
	on_retry(-1, 0, ls); /* starts every connect */
	return 0;
}

void links_close(struct links *ls)
{
	uint32_t i;

	for (i = 0; i < ls->n; i++) {
		if (ls->all[i]->bev)
			bufferevent_free(ls->all[i]->bev);
		free(ls->all[i]);
	}
	free(ls->all);
	free(ls->gws);
	if (ls->retry)
		event_free(ls->retry);
	memset(ls, 0, sizeof(*ls));
}

static bool shunned(const struct links *ls, const struct link *l, uint64_t now)
{
	return ls->gws[l->gw].until_ns > now;
}

/*
 * The fewest in flight is the wrong measure for a gateway that fails what
 * it gets at once (every backend down, or draining for a stop): it always
 * has the fewest, so it would get most requests. So its links are passed
 * over while it is shunned, as long as another gateway has a link up (full
 * or not: better to wait for room there than to fail here).
 */
struct link *links_pick(struct links *ls, const struct link *avoid, uint64_t now)
{
	struct link *best = NULL;
	bool trusted_up = false;
	uint32_t i;

	for (i = 0; i < ls->n; i++) {
		const struct link *l = ls->all[i];

		if (l->up && !l->going && (!avoid || l->gw != avoid->gw) && !shunned(ls, l, now))
			trusted_up = true;
	}
	for (i = 0; i < ls->n; i++) {
		struct link *l = ls->all[i];

		if (!l->up || l->going || (avoid && l->gw == avoid->gw) ||
		    (trusted_up && shunned(ls, l, now)))
			continue;
		if ((!ls->inflight_cap || l->inflight < ls->inflight_cap) &&
		    (!best || l->inflight < best->inflight))
			best = l;
	}
	return best;
}

bool links_other_live(const struct links *ls, const struct link *avoid)
{
	uint32_t i;

	for (i = 0; i < ls->n; i++)
		if (ls->all[i]->bev && !ls->all[i]->going && ls->all[i]->gw != avoid->gw)
			return true;
	return false;
}

void links_refused(struct links *ls, const struct link *l, uint64_t now)
{
	struct gw_health *h = &ls->gws[l->gw];
	uint64_t ms = (uint64_t)SHUN_FIRST_MS
		      << (h->refused < SHUN_MAX_SHIFT ? h->refused : SHUN_MAX_SHIFT);

	if (ls->ngws < 2)
		return; /* nowhere else to send them */
	h->refused_ns = now;
	if (h->until_ns > now)
		return; /* refusals of requests sent before it was shunned */
	h->refused++;
	h->until_ns = now + ms * 1000000ull;
	pr_warn("event=gateway_shunned gateway=%s refused_in_a_row=%u for_ms=%llu "
		"hint=\"it failed a request at once; new requests go to the other gateways\"",
		l->name, h->refused, (unsigned long long)ms);
}

void links_served(struct links *ls, const struct link *l, uint64_t sent_ns)
{
	struct gw_health *h = &ls->gws[l->gw];

	if (!h->refused || sent_ns <= h->refused_ns)
		return;
	pr_info("event=gateway_serving gateway=%s after_refused=%u", l->name, h->refused);
	h->refused = 0;
	h->until_ns = 0;
}

uint32_t links_up(const struct links *ls)
{
	uint32_t i, n = 0;

	for (i = 0; i < ls->n; i++)
		n += ls->all[i]->up && !ls->all[i]->going;
	return n;
}

uint32_t links_going(const struct links *ls)
{
	uint32_t i, n = 0;

	for (i = 0; i < ls->n; i++)
		n += ls->all[i]->up && ls->all[i]->going;
	return n;
}

uint32_t links_connecting(const struct links *ls)
{
	uint32_t i, n = 0;

	for (i = 0; i < ls->n; i++)
		n += ls->all[i]->bev && !ls->all[i]->up;
	return n;
}

int link_send(struct link *l, const struct kvs_msg *m, const void *payload, uint32_t len)
{
	uint8_t hdr[KVS_HDR_LEN];
	struct kvs_msg h = *m;
	struct evbuffer *out;

	if (!l->up || l->fin_sent)
		return -ENOTCONN;
	h.payload_len = len;
	kvs_hdr_encode(&h, hdr);
	out = bufferevent_get_output(l->bev);
	if (evbuffer_add(out, hdr, sizeof(hdr)) || (len && evbuffer_add(out, payload, len))) {
		link_down(l, "out of memory");
		return -ENOMEM;
	}
	if (m->type == KVS_T_REQUEST)
		l->inflight++;
	return 0;
}
