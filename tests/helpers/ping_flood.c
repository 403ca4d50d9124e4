// SPDX-License-Identifier: MIT
/*
 * ping_flood: CONNS connections to a gateway, each sending PINGs for
 * SECONDS, as fast as it can (RATE 0, the default: a batch of PINGs
 * whenever the socket takes more) or RATE a second (a client's health
 * check, or a flood paced so that the flooder's own CPU does not starve
 * the machine), reading every answer. Then one line:
 *
 *   conns=N seconds=S sent=X pongs=P busy=B errors=E closed=C max_conn_pongs=M
 *
 * pongs: PONGs received in all (M: on the connection that got the most);
 * busy: ERROR busy frames (E: every ERROR); closed: connections the gateway
 * closed before the end. With --drain, it then waits (10 s at most) for
 * the answers to every PING it sent, for a client whose every PING is owed
 * one (the reading side of a busy machine lags). SECONDS and the rates
 * count the sending only. With --reconnect, a closed connection is opened
 * again at once (a flooder that does not give up). SIGTERM ends the run
 * early (the line is printed all the same); a paced flooder stopped
 * (SIGSTOP) and continued does not catch up on what it did not send.
 *
 *   ping_flood ADDR:PORT CONNS SECONDS [RATE] [--reconnect|--drain]
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "codec.h"
#include "netutil.h"

#define MAX_CONNS 256
#define BATCH 256 /* PINGs a write when flooding: 16 KiB */

struct flooder {
	int fd;
	struct kvs_buf rx;
	uint8_t *out; /* BATCH PINGs */
	size_t out_len, out_off, out_end;
	uint64_t sent, pongs;
	uint64_t skipped; /* paced: PINGs not sent while stopped (SIGSTOP) */
};

static volatile sig_atomic_t stop;

static void on_term(int sig)
{
	(void)sig;
	stop = 1;
}

struct totals {
	uint64_t sent, pongs, busy, errors, max_pongs;
	uint32_t closed;
};

static uint8_t *ping_batch(size_t *len)
{
	struct kvs_buf b;
	uint8_t *p;

	kvs_buf_init(&b, 0);
	for (uint32_t i = 0; i < BATCH; i++) {
		struct kvs_msg m = { .type = KVS_T_PING, .req_id = i + 1 };

		if (kvs_put_frame(&b, &m, NULL, 0)) {
			kvs_buf_free(&b);
			return NULL;
		}
	}
	*len = b.len;
	p = malloc(b.len);
	if (p)
		memcpy(p, kvs_buf_head(&b), b.len);
	kvs_buf_free(&b);
	return p;
}

static int open_conn(struct flooder *f, const struct kvs_addr *a)
{
	f->fd = kvs_connect(a, 5000);
	if (f->fd < 0)
		return f->fd;
	fcntl(f->fd, F_SETFL, fcntl(f->fd, F_GETFL) | O_NONBLOCK);
	kvs_buf_free(&f->rx);
	kvs_buf_init(&f->rx, 0);
	f->out_off = 0;
	return 0;
}

/* PINGs due by now when paced (one at t0, then rate a second). */
static uint64_t due(uint32_t rate, uint64_t t0, uint64_t now)
{
	return (now - t0) / 1000 * rate / 1000000 + 1;
}

/* Writes what the socket takes: the rest of a batch when flooding, the
 * PINGs due by now (at most a batch) when paced. -1 when the connection is
 * gone. */
static int send_some(struct flooder *f, uint32_t rate, uint64_t t0, uint64_t now)
{
	size_t one = f->out_len / BATCH, end = f->out_len;
	ssize_t n;

	if (rate && !f->out_off) {
		uint64_t n_due = due(rate, t0, now) - f->skipped;

		if (n_due <= f->sent)
			return 0;
		if (n_due - f->sent > 4 * BATCH) { /* stopped a while: no catching up */
			f->skipped += n_due - f->sent - BATCH;
			n_due = f->sent + BATCH;
		}
		end = (n_due - f->sent < BATCH ? n_due - f->sent : BATCH) * one;
		f->out_end = end;
	} else if (rate) {
		end = f->out_end;
	}
	n = send(f->fd, f->out + f->out_off, end - f->out_off, MSG_NOSIGNAL);
	if (n < 0)
		return errno == EAGAIN || errno == EINTR ? 0 : -1;
	f->out_off += (size_t)n;
	f->sent += (f->out_off / one) - ((f->out_off - (size_t)n) / one);
	if (f->out_off == end)
		f->out_off = 0;
	return 0;
}

/* Reads and counts the answers. -1 when the connection is gone. */
static int read_some(struct flooder *f, struct totals *t)
{
	const uint8_t *frame;
	struct kvs_msg m;
	long n = kvs_buf_recv(&f->rx, f->fd, 65536);
	int st;

	if (n == 0 || (n < 0 && n != -EAGAIN && n != -EINTR))
		return -1;
	while ((st = kvs_next_frame(&f->rx, KVS_MAX_PAYLOAD_LIMIT, &m, &frame)) > 0) {
		if (m.type == KVS_T_PONG) {
			f->pongs++;
		} else if (m.type == KVS_T_ERROR) {
			t->errors++;
			t->busy += m.status == KVS_E_BUSY;
		}
		kvs_buf_consume(&f->rx, KVS_HDR_LEN + m.payload_len);
	}
	return st < 0 ? -1 : 0;
}

/* Reads until every connection still open has had an answer for each PING
 * it sent, 10 s at most. */
static void drain_answers(struct flooder *fl, struct pollfd *pfd, uint32_t conns, struct totals *t)
{
	uint64_t end = kvs_now_ns() + 10 * 1000000000ull;

	while (kvs_now_ns() < end) {
		uint32_t owed = 0;

		for (uint32_t i = 0; i < conns; i++) {
			pfd[i].fd = fl[i].fd >= 0 && fl[i].pongs < fl[i].sent ? fl[i].fd : -1;
			pfd[i].events = POLLIN;
			owed += pfd[i].fd >= 0;
		}
		if (!owed || poll(pfd, conns, 100) < 0)
			return;
		for (uint32_t i = 0; i < conns; i++) {
			if (pfd[i].fd < 0 || !(pfd[i].revents & (POLLIN | POLLERR | POLLHUP)))
				continue;
			if (read_some(&fl[i], t) < 0) {
				close(fl[i].fd);
				fl[i].fd = -1;
			}
		}
	}
}

int main(int argc, char **argv)
{
	static struct flooder fl[MAX_CONNS];
	struct pollfd pfd[MAX_CONNS];
	struct totals t = { 0 };
	struct kvs_addr addr;
	uint32_t conns, rate = 0;
	uint64_t t0, end, now;
	double seconds;
	bool reconnect = argc > 1 && !strcmp(argv[argc - 1], "--reconnect");
	bool drain = argc > 1 && !strcmp(argv[argc - 1], "--drain");
	int nargs = argc - reconnect - drain;
	uint8_t *batch;
	size_t blen;

	if (nargs < 4 || nargs > 5 || kvs_parse_addr(argv[1], &addr)) {
		fprintf(stderr,
			"usage: ping_flood ADDR:PORT CONNS SECONDS [RATE] [--reconnect|--drain]\n");
		return 2;
	}
	conns = (uint32_t)atoi(argv[2]);
	seconds = atof(argv[3]);
	if (nargs == 5)
		rate = (uint32_t)atoi(argv[4]);
	batch = ping_batch(&blen);
	if (!batch || !conns || conns > MAX_CONNS || seconds <= 0)
		return 2;
	t0 = kvs_now_ns();
	for (uint32_t i = 0; i < conns; i++) {
		kvs_buf_init(&fl[i].rx, 0);
		fl[i].out = batch;
		fl[i].out_len = blen;
		if (open_conn(&fl[i], &addr)) {
			fprintf(stderr, "ping_flood: connect failed\n");
			return 1;
		}
	}
	end = t0 + (uint64_t)(seconds * 1e9);
	signal(SIGTERM, on_term);
	while (!stop && (now = kvs_now_ns()) < end) {
		uint32_t live = 0;

		for (uint32_t i = 0; i < conns; i++) {
			pfd[i].fd = fl[i].fd;
			pfd[i].events = POLLIN;
			if (!rate || fl[i].out_off ||
			    due(rate, t0, now) - fl[i].skipped > fl[i].sent)
				pfd[i].events |= POLLOUT;
			live += fl[i].fd >= 0;
		}
		if (!live)
			break;
		if (poll(pfd, conns, rate ? 1 : 100) < 0 && errno != EINTR)
			break;
		now = kvs_now_ns();
		for (uint32_t i = 0; i < conns; i++) {
			struct flooder *f = &fl[i];
			bool gone = false;

			if (f->fd < 0)
				continue;
			if (pfd[i].revents & (POLLIN | POLLERR | POLLHUP))
				gone = read_some(f, &t) < 0;
			if (!gone && (pfd[i].revents & POLLOUT))
				gone = send_some(f, rate, t0, now) < 0;
			if (!gone)
				continue;
			t.closed++;
			close(f->fd);
			f->fd = -1;
			if (reconnect && open_conn(f, &addr))
				f->fd = -1;
		}
	}
	seconds = (double)(kvs_now_ns() - t0) / 1e9;
	if (drain)
		drain_answers(fl, pfd, conns, &t);
	for (uint32_t i = 0; i < conns; i++) {
		t.sent += fl[i].sent;
		t.pongs += fl[i].pongs;
		if (fl[i].pongs > t.max_pongs)
			t.max_pongs = fl[i].pongs;
		if (fl[i].fd >= 0)
			close(fl[i].fd);
		kvs_buf_free(&fl[i].rx);
	}
	free(batch);
	printf("conns=%u seconds=%.2f sent=%llu pongs=%llu busy=%llu errors=%llu closed=%u "
	       "max_conn_pongs=%llu\n",
	       conns, seconds, (unsigned long long)t.sent, (unsigned long long)t.pongs,
	       (unsigned long long)t.busy, (unsigned long long)t.errors, t.closed,
	       (unsigned long long)t.max_pongs);
	return 0;
}
