// SPDX-License-Identifier: MIT
/*
 * Lingering closes. A socket closed with bytes unread makes TCP send a
 * reset, and a client still sending its request (a body libevent refused
 * unread, past 4 x --max-body; a connection refused at accept, whose
 * request was on its way; a request cut at --request-timeout) then gets
 * "connection reset", not the 413, 429, 503 or 408 written to it: the
 * openai library reports "Connection error" and says nothing of why. So
 * such a socket is kept a little: the front's FIN goes after the
 * response, and what the client still sends is read and dropped until it
 * closes, for LINGER_S at most, as HTTP servers do (nginx's
 * lingering_close).
 *
 * A duplicate of the descriptor is kept: libevent closes its own as it
 * frees the connection, and the socket lives on in the copy.
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>

#include "front.h"
#include "netutil.h"

#define LINGER_S 5
#define LINGER_MAX FRONT_LINGER_MAX

struct lingering {
	struct lingers *lg;
	evutil_socket_t fd;
	struct event *ev;
	uint64_t until_ns; /* kvs_now_ns */
};

struct lingers {
	struct event_base *base;
	struct front_stats *st;
	uint32_t n;
	struct lingering **all; /* to close the ones left at exit */
};

struct lingers *lingers_new(struct event_base *base, struct front_stats *st)
{
	struct lingers *lg = calloc(1, sizeof(*lg));

	if (!lg)
		return NULL;
	lg->all = calloc(LINGER_MAX, sizeof(*lg->all));
	if (!lg->all) {
		free(lg);
		return NULL;
	}
	lg->base = base;
	lg->st = st;
	return lg;
}

static void done(struct lingering *l)
{
	struct lingers *lg = l->lg;

	for (uint32_t i = 0; i < LINGER_MAX; i++)
		if (lg->all[i] == l) {
			lg->all[i] = NULL;
			break;
		}
	lg->n--;
	event_free(l->ev);
	close(l->fd);
	free(l);
}

void lingers_free(struct lingers *lg)
{
	if (!lg)
		return;
	for (uint32_t i = 0; i < LINGER_MAX; i++)
		if (lg->all[i])
			done(lg->all[i]);
	free(lg->all);
	free(lg);
}

/* What came is dropped; the client's close, an error or the end of
 * LINGER_S ends it. */
static void on_readable(evutil_socket_t fd, short what, void *arg)
{
	struct lingering *l = arg;
	uint64_t now = kvs_now_ns(), left;
	struct timeval tv;
	char buf[16384];
	ssize_t r;
	int n = 0;

	if ((what & EV_TIMEOUT) || now >= l->until_ns) {
		done(l);
		return;
	}
	/* a few reads a turn: a fast sender must not hold the loop (the event
	 * is level-triggered: it runs again) */
	do
		r = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
	while (r > 0 && ++n < 4);
	if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
		done(l);
		return;
	}
	/* the event's timeout counts from its last run: what is left of
	 * LINGER_S, not LINGER_S again */
	left = (l->until_ns - now) / 1000;
	tv.tv_sec = (time_t)(left / 1000000);
	tv.tv_usec = (suseconds_t)(left % 1000000);
	event_add(l->ev, &tv);
}

/* Whether the client may still be sending: bytes not read yet, or (unsure)
 * nothing either way; not once it has closed or reset. */
static bool may_send(evutil_socket_t fd, bool unsure_too)
{
	char c;
	ssize_t r = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);

	if (r > 0)
		return true;
	return r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && unsure_too;
}

void lingers_add(struct lingers *lg, evutil_socket_t fd, bool quiet_too)
{
	struct timeval tv = { LINGER_S, 0 };
	struct lingering *l;
	uint32_t i;

	if (!lg || !may_send(fd, quiet_too) || lg->n >= LINGER_MAX)
		return;
	l = calloc(1, sizeof(*l));
	if (!l)
		return;
	l->lg = lg;
	l->fd = dup(fd);
	if (l->fd < 0) {
		free(l);
		return;
	}
	l->ev = event_new(lg->base, l->fd, EV_READ | EV_PERSIST, on_readable, l);
	if (!l->ev || event_add(l->ev, &tv)) {
		if (l->ev)
			event_free(l->ev);
		close(l->fd);
		free(l);
		return;
	}
	shutdown(l->fd, SHUT_WR);
	l->until_ns = kvs_now_ns() + LINGER_S * 1000000000ull;
	for (i = 0; lg->all[i]; i++)
		;
	lg->all[i] = l;
	lg->n++;
	lg->st->closes_lingered++;
}
