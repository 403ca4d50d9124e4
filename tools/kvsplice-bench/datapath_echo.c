// SPDX-License-Identifier: MIT
/*
 * kvsplice-bench datapath's echo backend: each REQUEST answered by a CHUNK
 * carrying its payload back, then an END; a stream request (max_tokens > 1)
 * by CHUNKs paced as a serving engine's decode steps; a PING by a PONG. A thread per
 * connection, and one more for its streams.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "codec.h"
#include "datapath_int.h"
#include "frameorder.h"
#include "kvsplice/proto.h"
#include "netutil.h"

struct stream {
	struct kvs_msg m; /* the request's routing fields, answered back */
	uint32_t left;	  /* CHUNKs still to send */
};

/* One backend connection: its reader answers rr/pipelined requests at once;
 * its stepper answers the streams. */
struct echo_conn {
	int fd;
	const struct echo *cfg;
	pthread_mutex_t wlock; /* frames are written whole */
	pthread_mutex_t lock;  /* streams, closing */
	pthread_cond_t cv;
	struct stream *streams;
	uint32_t n, cap;
	bool closing;
};

static int echo_write(struct echo_conn *c, const void *buf, size_t len)
{
	int err;

	pthread_mutex_lock(&c->wlock);
	err = kvs_write_all(c->fd, buf, len);
	pthread_mutex_unlock(&c->wlock);
	return err;
}

/* An END carrying the gateway's fields back (it routes responses by them). */
static size_t echo_end(const struct kvs_msg *m, uint32_t output_tokens, uint8_t *buf)
{
	struct kvs_msg r = { .type = KVS_T_END,
			     .req_id = m->req_id,
			     .gw_backend = m->gw_backend,
			     .gw_conn = m->gw_conn,
			     .payload_len = sizeof(struct kvs_end) };
	struct kvs_end_info e = { .prompt_tokens = m->payload_len / 4,
				  .output_tokens = output_tokens };

	kvs_hdr_encode(&r, buf);
	kvs_end_encode(&e, buf + KVS_HDR_LEN);
	return KVS_HDR_LEN + sizeof(struct kvs_end);
}

/*
 * The streams, as a serving engine makes them: every gap_us a decode step
 * gives each running request one token, which goes out as a CHUNK of its
 * own write, interleaved with the other requests' on the same connection;
 * after its last, the END. The requests of a connection are answered
 * concurrently, as the gateway multiplexes many clients onto a few. With
 * step_write, a step's CHUNKs (and ENDs) of the connection go out in one
 * write, each client's together (kvs_frames_by_client), as kvsplice-sim
 * and kvsplice-adapter write them.
 */
static void *echo_stepper(void *arg)
{
	struct echo_conn *c = arg;
	size_t clen = KVS_HDR_LEN + c->cfg->chunk_bytes;
	size_t flen = clen + KVS_HDR_LEN + sizeof(struct kvs_end);
	uint8_t *buf = NULL, *step = NULL;
	size_t step_cap = 0, used;
	struct timespec next;

	buf = malloc(flen);
	if (!buf)
		return NULL;
	memset(buf + KVS_HDR_LEN, 't', c->cfg->chunk_bytes);
	/* (a stream may be there before the first wait: the pace starts now) */
	clock_gettime(CLOCK_MONOTONIC, &next);
	pthread_mutex_lock(&c->lock);
	while (!c->closing) {
		if (!c->n) {
			pthread_cond_wait(&c->cv, &c->lock);
			clock_gettime(CLOCK_MONOTONIC, &next);
			continue;
		}
		if (c->cfg->step_write) {
			if (step_cap < c->n * flen) {
				uint8_t *n = realloc(step, c->n * flen);

				if (!n)
					break;
				step = n;
				step_cap = c->n * flen;
			}
		}
		used = 0;
		for (uint32_t i = 0; i < c->n && !c->closing;) {
			struct stream *s = &c->streams[i];
			struct kvs_msg r = s->m;
			uint8_t *out = c->cfg->step_write ? step + used : buf;
			size_t len = clen;
			int err = 0;

			r.type = KVS_T_CHUNK;
			r.payload_len = c->cfg->chunk_bytes;
			kvs_hdr_encode(&r, out);
			if (out != buf)
				memset(out + KVS_HDR_LEN, 't', c->cfg->chunk_bytes);
			if (--s->left == 0)
				len += echo_end(&s->m, s->m.max_tokens, out + clen);
			if (c->cfg->step_write)
				used += len;
			else /* the CHUNK, then the END: writes of their own */
				err = echo_write(c, out, clen) ||
				      (len > clen && echo_write(c, out + clen, len - clen));
			if (err)
				c->closing = true;
			if (s->left == 0)
				*s = c->streams[--c->n];
			else
				i++;
		}
		if (used && (kvs_frames_by_client(step, used) < 0 || echo_write(c, step, used)))
			c->closing = true;
		if (c->cfg->gap_us) {
			/* absolute deadlines: the pace does not drift with the
			 * time the writes take */
			next.tv_nsec += (long)c->cfg->gap_us * 1000;
			while (next.tv_nsec >= 1000000000L) {
				next.tv_nsec -= 1000000000L;
				next.tv_sec++;
			}
			pthread_mutex_unlock(&c->lock);
			clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
			pthread_mutex_lock(&c->lock);
		}
	}
	pthread_mutex_unlock(&c->lock);
	free(step);
	free(buf);
	return NULL;
}

static int echo_add_stream(struct echo_conn *c, const struct kvs_msg *m)
{
	int err = 0;

	pthread_mutex_lock(&c->lock);
	if (c->n == c->cap) {
		uint32_t cap = c->cap ? 2 * c->cap : 64;
		struct stream *s = realloc(c->streams, cap * sizeof(*s));

		if (s) {
			c->streams = s;
			c->cap = cap;
		} else {
			err = -ENOMEM;
		}
	}
	if (!err) {
		c->streams[c->n++] = (struct stream){ .m = *m, .left = m->max_tokens };
		pthread_cond_signal(&c->cv);
	}
	pthread_mutex_unlock(&c->lock);
	return err;
}

/* Reads requests until the connection ends: rr/pipelined ones answered at
 * once, streams handed to the stepper (started with the first). */
static void echo_requests(struct echo_conn *c, pthread_t *stepper, bool *stepping)
{
	size_t cap = 1 << 16;
	uint8_t *buf = malloc(cap);
	uint8_t hdr[KVS_HDR_LEN];

	if (!buf)
		return;
	while (kvs_read_all(c->fd, hdr, KVS_HDR_LEN) == 0) {
		struct kvs_msg m, r;
		size_t need;

		if (kvs_hdr_decode(hdr, KVS_MAX_PAYLOAD_LIMIT, &m) != KVS_E_OK)
			break;
		need = 2 * KVS_HDR_LEN + (size_t)m.payload_len + sizeof(struct kvs_end);
		if (need > cap) {
			uint8_t *n = realloc(buf, need);

			if (!n)
				break;
			buf = n;
			cap = need;
		}
		if (kvs_read_all(c->fd, buf + KVS_HDR_LEN, m.payload_len))
			break;
		if (m.type == KVS_T_PING) {
			/* The gateway probes each new connection with one (and
			 * its health checks): a PONG, no load to report. */
			struct kvs_load_info li = { 0 };

			r = (struct kvs_msg){ .type = KVS_T_PONG,
					      .req_id = m.req_id,
					      .gw_conn = m.gw_conn,
					      .payload_len = sizeof(struct kvs_load) };
			kvs_hdr_encode(&r, buf);
			kvs_load_encode(&li, buf + KVS_HDR_LEN);
			if (echo_write(c, buf, KVS_HDR_LEN + sizeof(struct kvs_load)))
				break;
			continue;
		}
		if (m.max_tokens > 1) {
			if (!*stepping && pthread_create(stepper, NULL, echo_stepper, c))
				break;
			*stepping = true;
			if (echo_add_stream(c, &m))
				break;
			continue;
		}
		/* The CHUNK echoes the prompt; the END follows, in one write. */
		r = (struct kvs_msg){ .type = KVS_T_CHUNK,
				      .req_id = m.req_id,
				      .gw_backend = m.gw_backend,
				      .gw_conn = m.gw_conn,
				      .payload_len = m.payload_len };
		kvs_hdr_encode(&r, buf);
		if (echo_write(c, buf,
			       KVS_HDR_LEN + m.payload_len +
				       echo_end(&m, 1, buf + KVS_HDR_LEN + m.payload_len)))
			break;
	}
	free(buf);
}

static struct echo_conn *echo_conn_new(int fd, const struct echo *cfg)
{
	struct echo_conn *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->fd = fd;
	c->cfg = cfg;
	pthread_mutex_init(&c->wlock, NULL);
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->cv, NULL);
	return c;
}

/* Closes the connection too. */
static void echo_conn_free(struct echo_conn *c)
{
	free(c->streams);
	close(c->fd);
	pthread_mutex_destroy(&c->wlock);
	pthread_mutex_destroy(&c->lock);
	pthread_cond_destroy(&c->cv);
	free(c);
}

static void *echo_conn(void *arg)
{
	struct echo_conn *c = arg;
	pthread_t stepper;
	bool stepping = false;

	echo_requests(c, &stepper, &stepping);
	pthread_mutex_lock(&c->lock);
	c->closing = true;
	pthread_cond_signal(&c->cv);
	pthread_mutex_unlock(&c->lock);
	if (stepping)
		pthread_join(stepper, NULL);
	echo_conn_free(c);
	return NULL;
}

void *dp_echo_accept(void *arg)
{
	const struct echo *l = arg;
	pthread_t t;
	int fd;

	while ((fd = accept(l->fd, NULL, NULL)) >= 0) {
		struct echo_conn *c = echo_conn_new(fd, l);

		kvs_set_nodelay(fd);
		if (!c)
			close(fd);
		else if (pthread_create(&t, NULL, echo_conn, c) == 0)
			pthread_detach(t);
		else
			echo_conn_free(c);
	}
	return NULL;
}
