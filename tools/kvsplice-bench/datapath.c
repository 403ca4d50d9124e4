// SPDX-License-Identifier: MIT
/*
 * kvsplice-bench datapath: what each way of moving the bytes costs, on this
 * machine, in one run. An echo backend (each REQUEST answered by a CHUNK
 * carrying its payload back, then an END) and a client of K connections live
 * in this process; between them, in turn:
 *
 *   direct    nothing (the ceiling, and the baseline latency and kernel time)
 *   kernel    kvspliced, the BPF sockmap path
 *   user      kvspliced --datapath user (the controller copies every frame)
 *   haproxy         HAProxy in TCP mode, option splice-auto, one thread
 *   haproxy-splice  the same with splice-request and splice-response forced
 *                   (splice-auto does not splice on loopback: its best case)
 *
 * for each frame size, request/response (one request in flight per
 * connection) and pipelined (--depth in flight); and LLM-shaped traffic
 * (stream): a --stream-request byte request answered by --stream-chunks small
 * CHUNKs, each its own write, as a server streams tokens. Per run:
 * requests/s, GB/s (request and response bytes), latency added over direct
 * (P50, P99), and the gateway's CPU per GB and per request: its own CPU
 * time (/proc/PID/stat) plus the softirq and kworker time the system spent
 * beyond what the direct run spent per byte (/proc/stat, /proc/PID/stat of
 * the kworkers): on loopback the sockmap verdict and TCP both run in
 * softirq, and the psock backlog in a kworker, so the gateway's kernel work
 * is not in its own process's time.
 */
#include "datapath.h"

#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "args.h"
#include "plot.h"
#include "codec.h"
#include "kvsplice/proto.h"
#include "netutil.h"
#include "stats.h"

#define PROG "kvsplice-bench datapath"
#define MAX_SIZES 8
#define MAX_CONNS 64
#define MAX_SAMPLES (1u << 20)

enum { C_DIRECT, C_KERNEL, C_USER, C_HAPROXY, C_HAPROXY_SPLICE, NCFG };
static const char *const cfg_names[NCFG] = { "direct", "kernel", "user", "haproxy",
					     "haproxy-splice" };
enum { M_RR, M_PIPE, M_STREAM, NMODES };
static const char *const mode_names[NMODES] = { "rr", "pipelined", "stream" };

struct dp_opts {
	uint32_t conns, depth;
	double seconds, warmup;
	uint32_t sizes[MAX_SIZES], nsizes;
	uint32_t stream_request, stream_chunks, stream_chunk_bytes, stream_gap_us;
	bool on[NCFG];
	bool mode_on[NMODES];
	bool json;
	const char *plot; /* --plot DIR */
	char gw_bin[4096];
	const char *haproxy;
};

struct result {
	int cfg, mode;
	uint32_t size;
	double rps, gbps, p50_us, p99_us;
	double proc_s, kernel_s, bytes; /* CPU: the gateway process, softirq + kworkers */
	double requests; /* answered in the measured window */
	double p50_added_us, p99_added_us, cpu_s_per_gb, proc_s_per_gb, cpu_us_per_req;
	bool ok;
};

/* ---- the echo backend ------------------------------------------------------ */

struct echo {
	int fd;               /* the listener */
	uint32_t chunk_bytes; /* a streamed CHUNK's payload */
	uint32_t gap_us;      /* between two decode steps (0: back to back) */
};

struct stream {
	struct kvs_msg m; /* the request's routing fields, answered back */
	uint32_t left;    /* CHUNKs still to send */
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
	struct kvs_msg r = { .type = KVS_T_END, .req_id = m->req_id, .gw_backend = m->gw_backend,
			     .gw_conn = m->gw_conn, .payload_len = sizeof(struct kvs_end) };
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
 * concurrently, as the gateway multiplexes many clients onto a few.
 */
static void *echo_stepper(void *arg)
{
	struct echo_conn *c = arg;
	size_t clen = KVS_HDR_LEN + c->cfg->chunk_bytes;
	uint8_t *buf = malloc(clen + KVS_HDR_LEN + sizeof(struct kvs_end));
	struct timespec next;

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
		for (uint32_t i = 0; i < c->n && !c->closing;) {
			struct stream *s = &c->streams[i];
			struct kvs_msg r = s->m;
			int err;

			r.type = KVS_T_CHUNK;
			r.payload_len = c->cfg->chunk_bytes;
			kvs_hdr_encode(&r, buf);
			err = echo_write(c, buf, clen);
			if (!err && --s->left == 0)
				err = echo_write(c, buf + clen,
						 echo_end(&s->m, s->m.max_tokens, buf + clen));
			if (err)
				c->closing = true;
			if (s->left == 0)
				*s = c->streams[--c->n];
			else
				i++;
		}
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
		if (m.max_tokens > 1) {
			if (!*stepping && pthread_create(stepper, NULL, echo_stepper, c))
				break;
			*stepping = true;
			if (echo_add_stream(c, &m))
				break;
			continue;
		}
		/* The CHUNK echoes the prompt; the END follows, in one write. */
		r = (struct kvs_msg){ .type = KVS_T_CHUNK, .req_id = m.req_id,
				      .gw_backend = m.gw_backend, .gw_conn = m.gw_conn,
				      .payload_len = m.payload_len };
		kvs_hdr_encode(&r, buf);
		if (echo_write(c, buf, KVS_HDR_LEN + m.payload_len +
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

static void *echo_accept(void *arg)
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

/* ---- the client ----------------------------------------------------------------- */

struct conn {
	int fd;
	uint32_t size, depth, id;
	uint32_t chunks; /* > 1: asks for a stream of that many CHUNKs */
	sem_t slots;         /* requests it may still put in flight */
	uint64_t *sent_ns;   /* by req_id % ring */
	uint32_t ring;
	volatile int *stop;  /* set at the deadline: send no more */
	uint64_t t_start, t_end;
	uint64_t done, bytes; /* requests answered within [t_start, t_end] */
	double *lat_us;       /* latency samples (shared array, own range) */
	uint32_t nlat, maxlat;
	uint64_t sent;
	bool failed;
};

static void *writer(void *arg)
{
	struct conn *c = arg;
	size_t len = KVS_HDR_LEN + c->size;
	uint8_t *f = malloc(len);
	struct kvs_msg m = { .type = KVS_T_REQUEST, .max_tokens = c->chunks ? c->chunks : 1,
			     .payload_len = c->size, .cache_key = c->id + 1 };

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

			if (now >= c->t_start && now <= c->t_end) {
				c->done++;
				c->bytes += KVS_HDR_LEN + (uint64_t)c->size + resp;
				if (c->nlat < c->maxlat)
					c->lat_us[c->nlat++] =
						(double)(now - c->sent_ns[m.req_id % c->ring]) / 1e3;
			}
		}
		resp = 0;
		sem_post(&c->slots);
	}
	free(b);
	return NULL;
}

/* ---- CPU time from /proc ---------------------------------------------------- */

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
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut,
			 &st) != 2)
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

/* ---- one measurement -------------------------------------------------------- */

static int run_load(const struct dp_opts *o, uint16_t port, uint32_t size, int mode, pid_t gw,
		    struct result *r)
{
	struct conn *cs = calloc(o->conns, sizeof(*cs));
	double *lat = calloc(MAX_SAMPLES, sizeof(double));
	pthread_t *th = calloc(2 * (size_t)o->conns, sizeof(pthread_t));
	uint32_t depth = mode == M_PIPE ? o->depth : 1, i, n = 0;
	volatile int stop = 0;
	struct kvs_addr a;
	uint64_t t0, t1;
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
			fprintf(stderr, PROG ": %s: connect to port %u: %s\n", cfg_names[r->cfg], port,
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
				fprintf(stderr, PROG ": %s: connection %u failed: %llu sent, none "
						"answered in the measured window\n",
					cfg_names[r->cfg], i, (unsigned long long)cs[i].sent);
				err = -EIO;
			}
		}
		r->requests = (double)done;
		r->rps = (double)done / o->seconds;
		r->bytes = bytes;
		r->gbps = bytes / o->seconds / 1e9;
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

/* ---- the gateways ------------------------------------------------------------- */

static int wait_port(const char *file, pid_t pid)
{
	for (int i = 0; i < 200; i++) {
		FILE *f = fopen(file, "r");
		int port = 0;

		if (f) {
			if (fscanf(f, "%d", &port) != 1)
				port = 0;
			fclose(f);
		}
		if (port > 0)
			return port;
		if (waitpid(pid, NULL, WNOHANG) == pid)
			return -ECHILD;
		usleep(25000);
	}
	return -ETIMEDOUT;
}

/* A free loopback port (HAProxy takes a fixed one). */
static int free_port(void)
{
	struct kvs_addr a;
	int fd, port;

	kvs_parse_addr("127.0.0.1:0", &a);
	fd = kvs_listen(&a, 1);
	if (fd < 0)
		return fd;
	port = kvs_local_port(fd);
	close(fd);
	return port;
}

static pid_t spawn(char *const argv[], const char *log)
{
	pid_t pid = fork();

	if (pid == 0) {
		FILE *f = fopen(log, "w");

		if (f)
			dup2(fileno(f), 2);
		execvp(argv[0], argv);
		_exit(127);
	}
	return pid;
}

/* Starts cfg's gateway in front of the echo backend; its pid and port. */
static pid_t start_gateway(const struct dp_opts *o, int cfg, uint16_t echo, const char *tmp,
			   int *port)
{
	char be[64], pf[600], pin[96], log[600], conf[600];
	pid_t pid;

	snprintf(be, sizeof(be), "127.0.0.1:%u", echo);
	snprintf(log, sizeof(log), "%s/%s.log", tmp, cfg_names[cfg]);
	if (cfg == C_HAPROXY || cfg == C_HAPROXY_SPLICE) {
		FILE *f;
		int p = free_port();

		snprintf(conf, sizeof(conf), "%s/haproxy.cfg", tmp);
		f = fopen(conf, "w");
		if (!f || p < 0) {
			if (f)
				fclose(f);
			return -EIO;
		}
		fprintf(f,
			"global\n    maxconn 1000\n    nbthread 1\n"
			"defaults\n    mode tcp\n    timeout connect 5s\n    timeout client 60s\n"
			"    timeout server 60s\n    %s\n"
			"listen kvs\n    bind 127.0.0.1:%d\n    server echo %s\n",
			cfg == C_HAPROXY ? "option splice-auto"
					 : "option splice-request\n    option splice-response",
			p, be);
		fclose(f);
		pid = spawn((char *const[]){ (char *)o->haproxy, "-db", "-f", conf, NULL }, log);
		/* HAProxy writes no port file: wait until it accepts. */
		for (int i = 0; pid > 0 && i < 200; i++) {
			struct kvs_addr a;
			int fd;

			kvs_parse_addr("127.0.0.1:0", &a);
			((struct sockaddr_in *)&a.ss)->sin_port = htons((uint16_t)p);
			fd = kvs_connect(&a, 100);
			if (fd >= 0) {
				close(fd);
				*port = p;
				return pid;
			}
			usleep(25000);
		}
		if (pid > 0)
			kill(pid, SIGKILL);
		return -ETIMEDOUT;
	}
	snprintf(pf, sizeof(pf), "%s/%s.port", tmp, cfg_names[cfg]);
	snprintf(pin, sizeof(pin), "/sys/fs/bpf/kvs-dpbench-%d", (int)getpid());
	pid = spawn((char *const[]){ (char *)o->gw_bin, "--listen", "127.0.0.1:0", "--port-file", pf,
				     "--pin-dir", pin, "--backend", be, "--datapath",
				     cfg == C_USER ? "user" : "kernel", "--health-interval-ms",
				     "0", "--log-level", "warn", NULL },
		    log);
	*port = pid > 0 ? wait_port(pf, pid) : -ECHILD;
	if (*port < 0) {
		fprintf(stderr, PROG ": %s did not start (see %s)\n", o->gw_bin, log);
		if (pid > 0)
			kill(pid, SIGKILL);
		return *port;
	}
	return pid;
}

static void stop_gateway(pid_t pid)
{
	char pin[96];

	if (pid <= 0)
		return;
	kill(pid, SIGTERM);
	waitpid(pid, NULL, 0);
	/* kvspliced leaves its (empty) pin directory: ours, remove it. */
	snprintf(pin, sizeof(pin), "/sys/fs/bpf/kvs-dpbench-%d", (int)getpid());
	rmdir(pin);
}

/* ---- report --------------------------------------------------------------------- */

static void print_table(const struct result *rs, int n)
{
	printf("%-14s %-9s %8s %10s %8s %10s %9s %9s %9s %10s\n", "config", "mode", "frame",
	       "req/s", "GB/s", "p50_us", "+p50_us", "+p99_us", "cpu_s/GB", "cpu_us/req");
	for (int i = 0; i < n; i++) {
		const struct result *r = &rs[i];

		if (!r->ok) {
			printf("%-14s %-9s %8u   (failed: see the log)\n", cfg_names[r->cfg],
			       mode_names[r->mode], r->size);
			continue;
		}
		printf("%-14s %-9s %8u %10.0f %8.3f %10.1f %9.1f %9.1f %9.3f %10.1f\n",
		       cfg_names[r->cfg], mode_names[r->mode], r->size, r->rps, r->gbps, r->p50_us,
		       r->p50_added_us, r->p99_added_us, r->cpu_s_per_gb, r->cpu_us_per_req);
	}
}

static void print_json(const struct dp_opts *o, const struct result *rs, int n)
{
	struct utsname u;

	uname(&u);
	printf("{\"kernel\":\"%s\",\"conns\":%u,\"depth\":%u,\"seconds\":%.1f,"
	       "\"stream_request\":%u,\"stream_chunks\":%u,\"stream_chunk_bytes\":%u,"
	       "\"stream_gap_us\":%u,\"configs\":[",
	       u.release, o->conns, o->depth, o->seconds, o->stream_request, o->stream_chunks,
	       o->stream_chunk_bytes, o->stream_gap_us);
	for (int i = 0; i < n; i++) {
		const struct result *r = &rs[i];

		printf("%s{\"name\":\"%s\",\"mode\":\"%s\",\"frame_bytes\":%u,\"ok\":%s,"
		       "\"rps\":%.1f,\"gbps\":%.4f,\"p50_us\":%.1f,\"p99_us\":%.1f,",
		       i ? "," : "", cfg_names[r->cfg], mode_names[r->mode], r->size,
		       r->ok ? "true" : "false", r->rps, r->gbps, r->p50_us, r->p99_us);
		/* Without a direct run there is nothing to add to: null, not nan
		 * (which is not JSON). */
		if (isnan(r->p50_added_us))
			printf("\"p50_added_us\":null,\"p99_added_us\":null,");
		else
			printf("\"p50_added_us\":%.1f,\"p99_added_us\":%.1f,", r->p50_added_us,
			       r->p99_added_us);
		printf("\"cpu_s_per_gb\":%.4f,\"proc_cpu_s_per_gb\":%.4f,\"cpu_us_per_req\":%.2f}",
		       r->cpu_s_per_gb, r->proc_s_per_gb, r->cpu_us_per_req);
	}
	printf("]}\n");
}

/* --plot DIR: GB/s and gateway CPU per GB by frame size, one bar per
 * configuration, request/response on the left, pipelined on the right (the
 * stream runs are in the table, not here: one size). */
static int plot(const struct dp_opts *o, const struct result *rs, int n)
{
	char path[4200];
	FILE *f;

	if (mkdir(o->plot, 0755) && errno != EEXIST) {
		fprintf(stderr, PROG ": --plot: cannot create %s: %s\n", o->plot, strerror(errno));
		return -errno;
	}
	snprintf(path, sizeof(path), "%s/datapath.dat", o->plot);
	f = fopen(path, "w");
	if (!f)
		return -errno;
	/* one block per mode; a row per frame size; columns per config */
	for (int mode = M_RR; mode <= M_PIPE; mode++) {
		fprintf(f,
			"# %s: frame_bytes, then GB/s and cpu_s/GB of direct kernel user haproxy "
			"haproxy-splice\n",
			mode_names[mode]);
		for (uint32_t s = 0; s < o->nsizes; s++) {
			double g[NCFG] = { 0 }, c[NCFG] = { 0 };

			for (int i = 0; i < n; i++) {
				if (rs[i].mode != mode || rs[i].size != o->sizes[s] || !rs[i].ok)
					continue;
				g[rs[i].cfg] = rs[i].gbps;
				c[rs[i].cfg] = rs[i].cpu_s_per_gb;
			}
			fprintf(f, "%u", o->sizes[s]);
			for (int k = 0; k < NCFG; k++)
				fprintf(f, " %.4f", g[k]);
			for (int k = 0; k < NCFG; k++)
				fprintf(f, " %.4f", c[k]);
			fprintf(f, "\n");
		}
		fprintf(f, "\n\n");
	}
	fclose(f);
	snprintf(path, sizeof(path), "%s/datapath.gp", o->plot);
	f = fopen(path, "w");
	if (!f)
		return -errno;
	fprintf(f, "# gnuplot datapath.gp (in this directory) redraws the pictures.\n"
		   "set style data histograms\nset style histogram clustered gap 1\n"
		   "set style fill solid 0.8 border -1\nset grid ytics\n"
		   "set xlabel 'frame payload (bytes)'\n"
		   "do for [t in 'svg png'] {\n"
		   "  if (t eq 'svg') { set terminal svg size 1100,800 } "
		   "else { set terminal pngcairo size 1100,800 }\n"
		   "  set output 'datapath.'.t\n  set multiplot layout 2,2\n"
		   "  do for [m=0:1] {\n"
		   "    set title (m == 0 ? 'request/response' : 'pipelined').': GB/s'\n"
		   "    unset logscale y\n    set key top left opaque\n"
		   "    plot for [k=2:6] 'datapath.dat' index m using k:xtic(1) lc (k-1) "
		   "title word('direct kernel user haproxy haproxy-splice', k-1)\n"
		   "    set title (m == 0 ? 'request/response' : 'pipelined')."
		   "': gateway CPU s per GB (log)'\n    set logscale y\n"
		   "    set key top right\n"
		   "    plot for [k=8:11] 'datapath.dat' index m using k:xtic(1) lc (k-6) "
		   "title word('kernel user haproxy haproxy-splice', k-7)\n"
		   "  }\n  unset multiplot\n}\n");
	fclose(f);
	return bench_gnuplot(PROG, o->plot, "datapath.gp");
}

/* Against the direct run of the same size and mode: latency added, and the
 * kernel time beyond what moving the bytes directly costs per byte. */
static void derive(struct result *rs, int n)
{
	for (int i = 0; i < n; i++) {
		const struct result *d = NULL;
		struct result *r = &rs[i];
		double base = 0, gb = r->bytes / 1e9;

		for (int j = 0; j < n; j++)
			if (rs[j].cfg == C_DIRECT && rs[j].size == r->size && rs[j].mode == r->mode &&
			    rs[j].ok)
				d = &rs[j];
		if (!r->ok || gb <= 0)
			continue;
		if (d && d->bytes > 0)
			base = d->kernel_s / d->bytes * r->bytes;
		r->p50_added_us = d ? r->p50_us - d->p50_us : NAN;
		r->p99_added_us = d ? r->p99_us - d->p99_us : NAN;
		r->proc_s_per_gb = r->proc_s / gb;
		r->cpu_s_per_gb = r->cfg == C_DIRECT ? 0 : (r->proc_s + r->kernel_s - base) / gb;
		r->cpu_us_per_req = r->cfg == C_DIRECT || r->requests <= 0
					    ? 0
					    : (r->proc_s + r->kernel_s - base) / r->requests * 1e6;
	}
}

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: kvsplice-bench datapath [options]\n"
		"\n"
		"The data-path benchmark: an echo backend and a client of K connections in\n"
		"this process, with nothing (direct), kvspliced's kernel path, its userspace\n"
		"path, HAProxy (TCP mode, splice-auto, one thread) and HAProxy with splicing\n"
		"forced (haproxy-splice) between them, for each frame size, request/response\n"
		"(rr) and pipelined; and LLM-shaped traffic (stream): a 32 KiB request answered\n"
		"by a stream of small CHUNKs, each its own write. Prints requests/s, GB/s,\n"
		"latency added over direct (P50, P99), and the gateway's CPU seconds per GB\n"
		"and microseconds per request (its own CPU plus the softirq and kworker time\n"
		"beyond the direct run's). Needs root.\n"
		"\n"
		"Options:\n"
		"  -k, --conns K          client connections (default 8)\n"
		"  -d, --depth D          requests in flight per connection when pipelined\n"
		"                         (default 16)\n"
		"      --sizes LIST       frame payload sizes in bytes (default\n"
		"                         1024,32768,262144)\n"
		"      --seconds S        measured seconds per run (default 3; 0.5 s warm-up)\n"
		"      --modes LIST       of rr,pipelined,stream (default: all three)\n"
		"      --stream-request B request bytes of a stream run (default 32768)\n"
		"      --stream-chunks N  CHUNKs answering it (default 256)\n"
		"      --stream-chunk-bytes B  payload of each (default 32)\n"
		"      --stream-gap-us G  between two CHUNKs of a stream (default 100: one\n"
		"                         per decode step of a fast model; 0: back to back,\n"
		"                         which lets a userspace proxy read many at once)\n"
		"      --configs LIST     of direct,kernel,user,haproxy,haproxy-splice\n"
		"                         (default: all; a config whose program is missing\n"
		"                         is left out, said)\n"
		"      --kvspliced PATH   the gateway (default: kvspliced beside this program)\n"
		"      --haproxy PATH     (default: haproxy on PATH)\n"
		"      --json             the results as JSON: {\"kernel\", \"configs\": [{name,\n"
		"                         mode, frame_bytes, rps, gbps, p50_added_us,\n"
		"                         p99_added_us, cpu_s_per_gb, ...}]}\n"
		"      --plot DIR         GB/s and CPU per GB by frame size, per config\n"
		"                         (gnuplot: DIR/datapath.{svg,png}, data and script)\n"
		"  -h, --help             this text\n");
}

static int parse_sizes(const char *s, struct dp_opts *o)
{
	char *copy = strdup(s), *save = NULL, *t;
	int err = copy ? 0 : -1;

	o->nsizes = 0;
	for (t = copy ? strtok_r(copy, ",", &save) : NULL; t && !err; t = strtok_r(NULL, ",", &save))
		err = o->nsizes == MAX_SIZES ||
		      kvs_arg_u32(PROG, "--sizes", t, 1, 4u << 20, &o->sizes[o->nsizes++]);
	free(copy);
	return err || !o->nsizes ? -1 : 0;
}

/* A comma-separated list of names into on[]: each must be one of names. */
static int parse_names(const char *opt, const char *s, const char *const *names, int n, bool *on)
{
	char *copy = strdup(s), *save = NULL, *t;
	int err = copy ? 0 : -1;

	memset(on, 0, sizeof(*on) * (size_t)n);
	for (t = copy ? strtok_r(copy, ",", &save) : NULL; t && !err; t = strtok_r(NULL, ",", &save)) {
		int c;

		for (c = 0; c < n && strcmp(t, names[c]); c++)
			;
		if (c == n) {
			fprintf(stderr, PROG ": %s: '%s' is not one of", opt, t);
			for (c = 0; c < n; c++)
				fprintf(stderr, "%s %s", c ? "," : "", names[c]);
			fprintf(stderr, "\n");
			err = -1;
		} else {
			on[c] = true;
		}
	}
	free(copy);
	return err;
}

/* Is prog runnable (a path, or on PATH)? */
static bool runnable(const char *prog)
{
	char cmd[4200];

	if (strchr(prog, '/'))
		return access(prog, X_OK) == 0;
	snprintf(cmd, sizeof(cmd), "command -v '%s' >/dev/null 2>&1", prog);
	return system(cmd) == 0;
}

int bench_datapath(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "conns", required_argument, NULL, 'k' },
		{ "depth", required_argument, NULL, 'd' },
		{ "sizes", required_argument, NULL, 's' },
		{ "seconds", required_argument, NULL, 'S' },
		{ "configs", required_argument, NULL, 'c' },
		{ "modes", required_argument, NULL, 'm' },
		{ "stream-request", required_argument, NULL, 'R' },
		{ "stream-chunks", required_argument, NULL, 'C' },
		{ "stream-chunk-bytes", required_argument, NULL, 'B' },
		{ "stream-gap-us", required_argument, NULL, 'G' },
		{ "kvspliced", required_argument, NULL, 'g' },
		{ "haproxy", required_argument, NULL, 'H' },
		{ "json", no_argument, NULL, 'j' },
		{ "plot", required_argument, NULL, 'p' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct dp_opts o = { .conns = 8, .depth = 16, .seconds = 3, .warmup = 0.5,
			     .sizes = { 1024, 32768, 262144 }, .nsizes = 3,
			     .stream_request = 32768, .stream_chunks = 256, .stream_chunk_bytes = 32,
			     .stream_gap_us = 100,
			     .on = { true, true, true, true, true },
			     .mode_on = { true, true, true }, .haproxy = "haproxy" };
	struct result rs[NCFG * (MAX_SIZES * 2 + 1)];
	char tmp[] = "/tmp/kvs-dpbench.XXXXXX";
	struct kvs_addr la;
	struct echo el;
	pthread_t et;
	int opt, n = 0, lfd, echo, rc = 0;
	ssize_t len;

	len = readlink("/proc/self/exe", o.gw_bin, sizeof(o.gw_bin) - 32);
	if (len > 0) {
		char *slash;

		o.gw_bin[len] = '\0';
		slash = strrchr(o.gw_bin, '/');
		strcpy(slash ? slash + 1 : o.gw_bin, "kvspliced");
	}
	optind = 1;
	while ((opt = getopt_long(argc, argv, "k:d:h", opts, NULL)) != -1) {
		switch (opt) {
		case 'k':
			if (kvs_arg_u32(PROG, "--conns", optarg, 1, MAX_CONNS, &o.conns))
				return 2;
			break;
		case 'd':
			if (kvs_arg_u32(PROG, "--depth", optarg, 1, 256, &o.depth))
				return 2;
			break;
		case 's':
			if (parse_sizes(optarg, &o))
				return 2;
			break;
		case 'S':
			if (kvs_arg_double(PROG, "--seconds", optarg, 0.2, 600, &o.seconds))
				return 2;
			break;
		case 'c':
			if (parse_names("--configs", optarg, cfg_names, NCFG, o.on))
				return 2;
			break;
		case 'm':
			if (parse_names("--modes", optarg, mode_names, NMODES, o.mode_on))
				return 2;
			break;
		case 'R':
			if (kvs_arg_u32(PROG, "--stream-request", optarg, 1, 4u << 20,
					&o.stream_request))
				return 2;
			break;
		case 'C':
			/* 2 at least: one CHUNK is the echo answer of rr */
			if (kvs_arg_u32(PROG, "--stream-chunks", optarg, 2, 100000, &o.stream_chunks))
				return 2;
			break;
		case 'G':
			if (kvs_arg_u32(PROG, "--stream-gap-us", optarg, 0, 1000000,
					&o.stream_gap_us))
				return 2;
			break;
		case 'B':
			if (kvs_arg_u32(PROG, "--stream-chunk-bytes", optarg, 1, 60000,
					&o.stream_chunk_bytes))
				return 2;
			break;
		case 'g':
			snprintf(o.gw_bin, sizeof(o.gw_bin), "%s", optarg);
			break;
		case 'H':
			o.haproxy = optarg;
			break;
		case 'j':
			o.json = true;
			break;
		case 'p':
			o.plot = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if ((o.on[C_KERNEL] || o.on[C_USER]) && !runnable(o.gw_bin)) {
		fprintf(stderr, PROG ": %s not found (--kvspliced PATH): kernel and user left out\n",
			o.gw_bin);
		o.on[C_KERNEL] = o.on[C_USER] = false;
	}
	if ((o.on[C_HAPROXY] || o.on[C_HAPROXY_SPLICE]) && !runnable(o.haproxy)) {
		fprintf(stderr,
			PROG ": %s not found (apt-get install haproxy, or --haproxy PATH): haproxy "
			     "left out\n",
			o.haproxy);
		o.on[C_HAPROXY] = o.on[C_HAPROXY_SPLICE] = false;
	}
	if (!mkdtemp(tmp)) {
		perror(PROG ": mkdtemp");
		return 1;
	}
	signal(SIGPIPE, SIG_IGN);
	kvs_parse_addr("127.0.0.1:0", &la);
	lfd = kvs_listen(&la, 256);
	echo = lfd >= 0 ? kvs_local_port(lfd) : -1;
	el = (struct echo){ .fd = lfd, .chunk_bytes = o.stream_chunk_bytes,
			    .gap_us = o.stream_gap_us };
	/* the stream's pace needs sleeps near gap_us, not the default 50 us
	 * timer slack on top */
	prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
	if (echo < 0 || pthread_create(&et, NULL, echo_accept, &el)) {
		fprintf(stderr, PROG ": cannot start the echo backend\n");
		return 1;
	}
	for (int cfg = 0; cfg < NCFG; cfg++) {
		int port = echo;
		pid_t gw = 0;

		if (!o.on[cfg])
			continue;
		if (cfg != C_DIRECT) {
			gw = start_gateway(&o, cfg, (uint16_t)echo, tmp, &port);
			if (gw < 0) {
				rc = 1;
				continue;
			}
		}
		/* every size rr and pipelined, then the one stream run */
		for (uint32_t s = 0; s <= o.nsizes; s++) {
			for (int mode = 0; mode < NMODES; mode++) {
				uint32_t size = s < o.nsizes ? o.sizes[s] : o.stream_request;
				struct result *r;

				if (!o.mode_on[mode] || (mode == M_STREAM) != (s == o.nsizes))
					continue;
				r = &rs[n++];
				memset(r, 0, sizeof(*r));
				r->cfg = cfg;
				r->mode = mode;
				r->size = size;
				if (!o.json)
					fprintf(stderr, "%s: %s, %u-byte frames, %s ...\n", PROG,
						cfg_names[cfg], size, mode_names[mode]);
				if (run_load(&o, (uint16_t)port, size, mode, gw, r) || !r->ok) {
					fprintf(stderr, PROG ": %s %s %u: failed (logs in %s)\n",
						cfg_names[cfg], mode_names[mode], size, tmp);
					rc = 1;
				}
			}
		}
		stop_gateway(gw);
	}
	derive(rs, n);
	if (o.plot && plot(&o, rs, n))
		rc = 1;
	if (o.json)
		print_json(&o, rs, n);
	else
		print_table(rs, n);
	close(lfd);
	return rc;
}
