// SPDX-License-Identifier: MIT
/*
 * kvsplice-bench datapath's client and measurement: K connections, each a
 * writer and a reader thread, for a warm-up and a measured window; the
 * requests, bytes and latency in the window, and the gateway's CPU time and
 * the kernel's (softirq, kworkers) from /proc over it.
 */
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "codec.h"
#include "datapath_int.h"
#include "kvsplice/proto.h"
#include "netutil.h"
#include "stats.h"

struct conn {
	int fd;
	uint32_t size, depth, id;
	uint32_t chunks;   /* > 1: asks for a stream of that many CHUNKs */
	sem_t slots;	   /* requests it may still put in flight */
	uint64_t *sent_ns; /* by req_id % ring */
	uint32_t ring;
	volatile int *stop; /* set at the deadline: send no more */
	uint64_t t_start, t_end;
	uint64_t done, bytes; /* requests answered within [t_start, t_end] */
	double *lat_us;	      /* latency samples (shared array, own range) */
	uint32_t nlat, maxlat;
	uint64_t sent;
	bool failed;
};

static void *writer(void *arg)
{
	struct conn *c = arg;
	size_t len = KVS_HDR_LEN + c->size;
	uint8_t *f = malloc(len);
	struct kvs_msg m = { .type = KVS_T_REQUEST,
			     .max_tokens = c->chunks ? c->chunks : 1,
			     .payload_len = c->size,
			     .cache_key = c->id + 1 };

	if (!f) {
		c->failed = true;
		return NULL;
	}
	for (size_t i = 0; i < c->size; i++)
		f[KVS_HDR_LEN + i] = (uint8_t)('a' + (i * 7 + c->id) % 26);
	while (!*c->stop) {
		sem_wait(&c->slots);
		if (*c->stop)
			break;
		m.req_id = ++c->sent;
		kvs_hdr_encode(&m, f);
		c->sent_ns[m.req_id % c->ring] = kvs_now_ns();
		if (kvs_write_all(c->fd, f, len)) {
			c->failed = true;
			break;
		}
	}
	free(f);
	return NULL;
}

static void *reader(void *arg)
{
	struct conn *c = arg;
	/* a request's echo, or one streamed CHUNK (at most 60000 bytes) */
	size_t cap = 2 * KVS_HDR_LEN + (c->size > 65536 ? c->size : 65536);
	uint8_t *b = malloc(cap);
	uint64_t answered = 0, resp = 0; /* response bytes of the request being answered */

	if (!b) {
		c->failed = true;
		return NULL;
	}
	for (;;) {
		struct kvs_msg m;

		if (*c->stop && answered == c->sent)
			break;
		if (kvs_read_all(c->fd, b, KVS_HDR_LEN) ||
		    kvs_hdr_decode(b, KVS_MAX_PAYLOAD_LIMIT, &m) != KVS_E_OK ||
		    m.payload_len > cap || kvs_read_all(c->fd, b, m.payload_len)) {
			c->failed = !*c->stop || answered != c->sent;
			break;
		}
		if (m.type == KVS_T_ERROR) {
			fprintf(stderr, PROG ": connection %u: ERROR %s: %.*s\n", c->id,
				kvs_status_name(m.status), (int)m.payload_len, (const char *)b);
			c->failed = true;
			break;
		}
		resp += KVS_HDR_LEN + (uint64_t)m.payload_len;
		if (m.type != KVS_T_END)
			continue;
		answered++;
		{
			uint64_t now = kvs_now_ns();

			if (now >= c->t_start &&
			    now <= __atomic_load_n(&c->t_end, __ATOMIC_RELAXED)) {
				__atomic_fetch_add(&c->done, 1, __ATOMIC_RELAXED);
				c->bytes += KVS_HDR_LEN + (uint64_t)c->size + resp;
				if (c->nlat < c->maxlat)
					c->lat_us[c->nlat++] =
						(double)(now - c->sent_ns[m.req_id % c->ring]) /
						1e3;
			}
		}
		resp = 0;
		sem_post(&c->slots);
	}
	free(b);
	return NULL;
}

static double ticks_s(unsigned long long t)
{
	return (double)t / (double)sysconf(_SC_CLK_TCK);
}

/* utime + stime of a process (all its threads), in ticks; 0 if gone. */
static unsigned long long proc_ticks(pid_t pid, char *name, size_t nlen)
{
	char path[64], buf[1024], *p;
	unsigned long long ut = 0, st = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	if (!fgets(buf, sizeof(buf), f)) {
		fclose(f);
		return 0;
	}
	fclose(f);
	p = strrchr(buf, ')'); /* the name may hold spaces */
	if (name && nlen) {
		char *o = strchr(buf, '(');

		snprintf(name, nlen, "%.*s", o && p ? (int)(p - o - 1) : 0, o ? o + 1 : "");
	}
	if (!p ||
	    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
		return 0;
	return ut + st;
}

/* The softirq column of /proc/stat plus every kworker's CPU time: where a
 * gateway's kernel work on loopback lands. */
static unsigned long long kernel_ticks(void)
{
	unsigned long long v[8] = { 0 }, sum;
	FILE *f = fopen("/proc/stat", "r");
	DIR *d;
	struct dirent *e;

	if (f) {
		if (fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
			   &v[4], &v[5], &v[6]) != 7)
			v[6] = 0;
		fclose(f);
	}
	sum = v[6];
	d = opendir("/proc");
	while (d && (e = readdir(d))) {
		char name[64];
		unsigned long long t;

		if (e->d_name[0] < '1' || e->d_name[0] > '9')
			continue;
		t = proc_ticks((pid_t)atoi(e->d_name), name, sizeof(name));
		if (!strncmp(name, "kworker", 7))
			sum += t;
	}
	if (d)
		closedir(d);
	return sum;
}

/* Whether any connection has had a request answered in its window yet. */
static bool answered_in(struct conn *cs, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		if (__atomic_load_n(&cs[i].done, __ATOMIC_RELAXED))
			return true;
	return false;
}

int dp_run_load(const struct dp_opts *o, const char *name, uint16_t port, uint32_t size, int mode,
		pid_t gw, struct result *r)
{
	struct conn *cs = calloc(o->conns, sizeof(*cs));
	double *lat = calloc(MAX_SAMPLES, sizeof(double));
	pthread_t *th = calloc(2 * (size_t)o->conns, sizeof(pthread_t));
	uint32_t depth = mode == M_PIPE	  ? o->depth :
			 mode == M_STREAM ? o->stream_depth :
					    1,
		 i, n = 0;
	volatile int stop = 0;
	struct kvs_addr a;
	uint64_t t0, t1;
	double window_s = o->seconds;
	unsigned long long p0, p1, k0, k1;
	int err = 0;

	if (!cs || !lat || !th) {
		err = -ENOMEM;
		goto out;
	}
	kvs_parse_addr("127.0.0.1:0", &a);
	((struct sockaddr_in *)&a.ss)->sin_port = htons(port);
	t0 = kvs_now_ns() + (uint64_t)(o->warmup * 1e9);
	t1 = t0 + (uint64_t)(o->seconds * 1e9);
	for (i = 0; i < o->conns; i++) {
		struct conn *c = &cs[i];

		c->fd = kvs_connect(&a, 2000);
		if (c->fd < 0) {
			fprintf(stderr, PROG ": %s: connect to port %u: %s\n", name, port,
				strerror(-c->fd));
			err = c->fd;
			break;
		}
		kvs_set_nodelay(c->fd);
		c->size = size;
		c->chunks = mode == M_STREAM ? o->stream_chunks : 0;
		c->depth = depth;
		c->id = i;
		c->ring = 4096;
		c->sent_ns = calloc(c->ring, sizeof(uint64_t));
		c->stop = &stop;
		c->t_start = t0;
		c->t_end = t1;
		c->lat_us = lat + (size_t)i * (MAX_SAMPLES / o->conns);
		c->maxlat = MAX_SAMPLES / o->conns;
		sem_init(&c->slots, 0, depth);
		n++;
	}
	for (i = 0; !err && i < n; i++) {
		pthread_create(&th[2 * i], NULL, reader, &cs[i]);
		pthread_create(&th[2 * i + 1], NULL, writer, &cs[i]);
	}
	if (!err) {
		while (kvs_now_ns() < t0)
			usleep(1000);
		p0 = gw > 0 ? proc_ticks(gw, NULL, 0) : 0;
		k0 = kernel_ticks();
		while (kvs_now_ns() < t1)
			usleep(1000);
		/* A window with nothing answered (the machine's cores busy with
		 * other work, the run short) measures nothing: it goes on, a
		 * tenth of a second at a time and 30 s at most, until something
		 * is; the rates are over the window as it was measured. */
		while (!answered_in(cs, n) &&
		       t1 < t0 + (uint64_t)(o->seconds * 1e9) + 30000000000ull) {
			t1 += 100000000ull;
			for (i = 0; i < n; i++)
				__atomic_store_n(&cs[i].t_end, t1, __ATOMIC_RELAXED);
			while (kvs_now_ns() < t1)
				usleep(1000);
		}
		window_s = (double)(t1 - t0) / 1e9;
		p1 = gw > 0 ? proc_ticks(gw, NULL, 0) : 0;
		k1 = kernel_ticks();
		/* A kworker that exits in between takes its ticks with it: the
		 * sum can go down (then counted 0, not wrapped). */
		r->proc_s = p1 > p0 ? ticks_s(p1 - p0) : 0;
		r->kernel_s = k1 > k0 ? ticks_s(k1 - k0) : 0;
	}
	stop = 1;
	for (i = 0; i < n; i++)
		sem_post(&cs[i].slots); /* a writer waiting for a slot: let it see stop */
	/* What is in flight is answered, or the reader gives up on its own:
	 * shutting the socket down ends a reader that waits too long. */
	usleep(200000);
	for (i = 0; i < n; i++)
		shutdown(cs[i].fd, SHUT_RDWR);
	for (i = 0; !err && i < n; i++) {
		pthread_join(th[2 * i], NULL);
		pthread_join(th[2 * i + 1], NULL);
	}
	if (!err) {
		uint64_t done = 0;
		double bytes = 0, *all = lat;
		uint32_t nl = 0;

		for (i = 0; i < n; i++) {
			done += cs[i].done;
			bytes += (double)cs[i].bytes;
			/* gather the samples to the front */
			memmove(all + nl, cs[i].lat_us, cs[i].nlat * sizeof(double));
			nl += cs[i].nlat;
			if (cs[i].failed && !cs[i].done) {
				fprintf(stderr,
					PROG ": %s: connection %u failed: %llu sent, none "
					     "answered in the measured window\n",
					name, i, (unsigned long long)cs[i].sent);
				err = -EIO;
			}
		}
		r->requests = (double)done;
		r->rps = (double)done / window_s;
		r->bytes = bytes;
		r->gbps = bytes / window_s / 1e9;
		r->p50_us = kvs_percentile(all, nl, 50);
		r->p99_us = kvs_percentile(all, nl, 99);
		r->ok = done > 0 && !err;
	}
out:
	for (i = 0; cs && i < n; i++) {
		close(cs[i].fd);
		free(cs[i].sent_ns);
		sem_destroy(&cs[i].slots);
	}
	free(cs);
	free(lat);
	free(th);
	return err;
}
