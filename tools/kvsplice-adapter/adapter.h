/* SPDX-License-Identifier: MIT */
/*
 * kvsplice-adapter: the types its files share. One adapter sits in front of
 * one inference server. Gateways (or clients) connect over KVS1 ("links");
 * each REQUEST becomes a "job": a streamed HTTP request to the server,
 * over libcurl's multi interface (keep-alive connections reused across
 * jobs). The server's state, read on an interval, answers PINGs.
 *
 * Files: main.c (options, the loop), link.c (KVS1 side: accept, frames in,
 * close), job.c (one request through HTTP), tx.c (frames out), state.c (the
 * server's load and health), and the pure parts openai.c, promtext.c (the
 * parsers) and life.c (the server's restarts; SSE splitting is
 * user/core/sse.c). Calls run one way: main calls link,
 * job and state; link calls job, tx and state; job calls tx and state;
 * tx and state call none of them.
 */
#ifndef KVS_ADAPTER_H
#define KVS_ADAPTER_H

#include <stdbool.h>
#include <stdint.h>

#include <curl/curl.h>

#include "buf.h"
#include "codec.h"
#include "life.h"
#include "log.h"
#include "openai.h"
#include "sse.h"

/* A link's send queue above this pauses its jobs' transfers (the server's
 * TCP window then holds what the gateway cannot take yet); below the low
 * mark they resume. */
#define ADAPTER_TX_HIGH (4u << 20)
#define ADAPTER_TX_LOW (1u << 20)
#define ADAPTER_JOB_BUCKETS 4096

struct adapter_config {
	const char *listen;
	const char *server; /* http://HOST:PORT, no trailing slash */
	const char *model;  /* NULL: the first of the server's /v1/models */
	const char *port_file;
	const char *extra_body; /* a JSON object merged into every request */
	uint32_t id;
	enum oai_kind kind;
	uint32_t max_payload;
	uint32_t max_conns;  /* HTTP connections to the server */
	uint32_t poll_ms;    /* how often the server's state is read */
	uint32_t stall_s;    /* a stream silent this long fails with timeout (not a
			      * whole answer: job_check_stalls) */
	uint32_t connect_ms; /* to the server */
	uint64_t kv_tokens;  /* the server's KV capacity; 0: what it says */
	enum kvs_log_level level;
};

/* The server's state as last read (state.c). */
struct server_state {
	bool ready; /* /health said ok, and requests connect */
	enum oai_kind kind;
	char model[256];  /* from /v1/models when --model is not given */
	uint32_t running; /* from /metrics or /slots */
	uint32_t waiting;
	uint32_t kv_used, kv_total; /* per mille of the KV cache, or 0/0 */
	uint64_t kv_tokens;	    /* its KV capacity, as it says; 0: not said */
	uint32_t slots;		    /* llama.cpp's slots (its /slots), 0: not known */
	uint64_t polls, poll_failures;
	uint64_t last_not_ready_log_ns; /* 0: not said since it was last ready */
	uint64_t silent_since_ns;	/* /health's first unanswered poll in a row, or 0 */
	struct server_life life;	/* its instance, for PONGs (life.h) */
	/* Said already (state.c, note()): a counter typed as a gauge; a
	 * counter, or the start time (last), that did not read. */
	bool gauge[LIFE_COUNTERS], unread[LIFE_COUNTERS + 1];
};

struct job;

/* A KVS1 connection from a gateway or a client. */
struct link {
	int fd;
	uint64_t id;
	uint64_t peer; /* a hash of the peer's address (not its port): which host */
	struct kvs_buf rx, tx;
	struct job *jobs; /* this link's requests, a list through link_next */
	uint32_t njobs;
	bool paused; /* its jobs' transfers are paused (tx above high) */
	bool tx_cut; /* a send may have left tx's first frame in part */
	bool eof;    /* the peer half-closed: answer what it asked, then close */
	bool dead;
};

/* Figures of one adapter, for its log line at exit. */
struct adapter_stats {
	uint64_t requests, ends, cancels, retries, duplicates, errors[KVS_E_MAX + 1];
	uint64_t held_after_done; /* transfers the server held open after [DONE] */
	uint64_t parked;	  /* cancelled whole answers kept until the server ended them */
	uint64_t chunks, chunk_bytes, links;
};

struct adapter {
	struct adapter_config cfg;
	int lfd;
	CURLM *multi;
	struct link **links;
	uint32_t nlinks, links_cap;
	uint64_t next_link_id;
	struct job *buckets[ADAPTER_JOB_BUCKETS]; /* jobs by (conn key, req_id) */
	uint32_t active;			  /* jobs in the multi handle: at most max_conns */
	uint32_t queued;			  /* jobs waiting for one of those */
	struct job *queue_head, *queue_tail;	  /* in arrival order */
	/* Jobs whose client has gone but whose server goes on (job.c,
	 * park_or_free): in a->active until the server ends them. */
	struct job *parked;
	uint32_t nparked;
	uint64_t accept_paused_until_ns; /* out of descriptors: the listener rests */
	uint64_t accept_failures;
	uint64_t next_stall_check_ns; /* job_check_stalls' next walk */
	struct server_state st;
	struct state_poll *poll; /* the poll in progress, or NULL */
	uint64_t next_poll_ns;
	char completions_url[512];
	char chat_url[512];
	/* A request's headers, the same for every one: a streamed one's and
	 * a whole JSON answer's, built once at start-up. */
	struct curl_slist *hdrs_stream, *hdrs_json;
	json_t *extra; /* cfg.extra_body, parsed */
	struct adapter_stats stats;
};

/* link.c */
/* 1 when a link was accepted, 0 when none is waiting, or -errno. */
int link_accept(struct adapter *a);
/* Reads and serves what arrived; -1 when the link is to be closed. */
int link_on_readable(struct adapter *a, struct link *l);
/* Closes it, stops its jobs, and frees it (removed from a->links). */
void link_close(struct adapter *a, struct link *l);

/* tx.c */
/* Appends one frame about request req (its req_id, gw_conn and gw_backend
 * echoed); false if the link is gone or its queue is at its cap (the link
 * is then marked dead). */
bool tx_frame(struct link *l, const struct kvs_msg *req, uint8_t type, uint16_t status,
	      const void *payload, uint32_t len);
/* A PONG to ping, saying instance (include/kvsplice/proto.h,
 * KVS_OFF_INSTANCE); as tx_frame otherwise. */
bool tx_pong(struct link *l, const struct kvs_msg *ping, uint32_t instance,
	     const struct kvs_load_info *li);
/* Writes what the socket takes; -1 on a socket error (marked dead). */
int tx_flush(struct link *l);

/* job.c */
/* Starts REQUEST m (prompt p) from link l; answers an ERROR itself when it
 * cannot. */
void job_start(struct adapter *a, struct link *l, const struct kvs_msg *m, const uint8_t *p);
/* CANCEL: ERROR cancelled sent, the job's transfer aborted (or, for a whole
 * answer that a closed connection would not stop, kept until the server
 * ends it, counted in active); unknown ids are ignored. */
void job_cancel(struct adapter *a, struct link *l, const struct kvs_msg *m);
/* A transfer finished (curl_multi_info_read): the END or the ERROR. */
void job_done(struct adapter *a, CURL *h, CURLcode res);
/* The link is closing: its jobs stop without an answer. */
void job_drop_link(struct adapter *a, struct link *l);
/* At exit: the transfers kept after their client left end too. */
void job_stop_all(struct adapter *a);
/* The link drained: its paused transfers resume. */
void job_resume_link(struct adapter *a, struct link *l);
/* Fails (ERROR timeout) the streams that brought no event for
 * --stall-timeout (not whole answers, which come at the end), and ends the
 * transfers still open a moment after their [DONE]; call outside curl's
 * callbacks. */
void job_check_stalls(struct adapter *a, uint64_t now_ns);

/* state.c */
/* Starts a poll when one is due; returns ms until the next is due. */
int state_tick(struct adapter *a, uint64_t now_ns);
/* A poll transfer finished; false if h is not one of the poll's. */
bool state_done(struct adapter *a, CURL *h, CURLcode res);
/* A request could not reach the server: not ready until a poll says so. */
void state_unreachable(struct adapter *a, const char *why);
void state_free(struct adapter *a);
/* The PONG payload's figures. */
void state_load(const struct adapter *a, struct kvs_load_info *li);
/* The instance PONGs say: new at start and whenever the server is seen to
 * have restarted (life.h). */
uint32_t state_instance(const struct adapter *a);
/* Requests sent to the server at once, at most (--max-connections, and
 * for llama.cpp its slots). */
uint32_t state_conn_cap(const struct adapter *a);

#endif
