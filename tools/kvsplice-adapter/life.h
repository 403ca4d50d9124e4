/* SPDX-License-Identifier: MIT */
/*
 * The inference server's lives as the adapter sees them: the instance its
 * PONGs say (include/kvsplice/proto.h, KVS_OFF_INSTANCE) changes when the
 * server behind it restarted, its cache lost, so that a gateway withdraws
 * the routes to that cache even though the adapter itself stayed up. Pure:
 * state.c feeds it each poll's reading.
 *
 * Which process answers is told, first to last authority, by:
 *  - its start time. A server whose /metrics has the standard
 *    process_start_time_seconds (the Prometheus client's process metric,
 *    which a Python server such as vLLM serves unless in multiprocess
 *    mode) says when its process started: another start time is another
 *    process, the same one is the same process, whatever else was seen.
 *  - its counters. The tokens a server has taken in and put out (state.c
 *    names them: llama.cpp's llamacpp:prompt_tokens_total and
 *    llamacpp:tokens_predicted_total, vLLM's and SGLang's
 *    prompt_tokens_total and generation_tokens_total) only grow within
 *    one process: one lower than the last reading's is another process
 *    (Prometheus' counter-reset rule), even with no down seen between two
 *    polls; none lower, the same process, even after a health check that
 *    failed and passed again (a llama-server answering 503 under load, a
 *    proxy's 502). A counter not grown since the first reading of it in
 *    this life (the adapter's first, for a server it found running) says
 *    nothing: a process starts its counters at 0 (llama.cpp, vLLM) or at
 *    the tokens of the request it sends itself before it says ready
 *    (SGLang's warmup), one that restarted without serving more shows
 *    that again, and the old process may have served after that reading
 *    and before it died. So a server that restarts having served nothing
 *    before and nothing since is not seen by its counters, and no cache
 *    worth a route was lost; one seen down is still taken as restarted
 *    (below). A counter missing from a reading is not compared (the last
 *    value read stays for the next reading that has it). The limit: a
 *    new process that has served more by the first poll that reads it than
 *    the old one had by the last is taken for the old one. The gateway
 *    sends no new request to a server read as down, and a request refused
 *    reads as down, so that takes a restart quicker than --poll-ms with no
 *    request between, of a server that had served next to nothing: little
 *    of its cache was worth a route.
 *  - without either: a server that refused connections or answered its
 *    health check with an error after having been ready, then is ready
 *    again, is taken to have restarted, and one restarted between two
 *    polls is not seen: --poll-ms bounds what can be missed.
 * A check that got no answer (timed out, reset) says nothing: a hung or
 * overloaded server keeps its cache, as a silent backend does at the
 * gateway. Once the process has said which it is (its start time, or a
 * counter grown), a ready reading whose /metrics gave no answer cannot
 * say whether it is the same process: a down seen before it waits for
 * the next reading that says (a check that failed and passed in the same
 * process, its /metrics slow at that poll, was taken for a restart; a
 * restart so read was read again when the new start time came).
 * A start time or counter that /metrics has but that does not read (a
 * sample NaN, +Inf or no number, in one label set of several: promtext.h)
 * is unknown at that reading: not compared, its last value kept, and
 * when nothing else in the reading decides, the reading is as one whose
 * /metrics gave no answer. (Its other label sets alone were summed: a
 * drop, read as a restart, and a jump when it read again.) A metric
 * typed as a gauge is not a counter (state.c does not read it as one).
 */
#ifndef KVS_ADAPTER_LIFE_H
#define KVS_ADAPTER_LIFE_H

#include <stdbool.h>
#include <stdint.h>

enum life_seen {
	LIFE_READY,  /* its health check passed */
	LIFE_DOWN,   /* it refused, or answered that it is not healthy */
	LIFE_SILENT, /* no answer: says nothing of its cache */
};

/* Counters that only grow within one process: tokens in, tokens out. */
#define LIFE_COUNTERS 2
/* A counter the reading has no sample of. */
#define LIFE_NO_COUNT (-1.0)

/* One poll's reading. Only a ready one's /metrics is looked at. */
struct life_reading {
	enum life_seen seen;
	bool metrics;		     /* /metrics answered: what follows is said */
	bool unread;		     /* ... but some of it did not read (given as none) */
	double started;		     /* process_start_time_seconds; 0: none */
	double count[LIFE_COUNTERS]; /* >= 0, or LIFE_NO_COUNT */
};

/* What a reading says: the same life, or a restart and how it shows. */
enum life_verdict {
	LIFE_SAME = 0,
	LIFE_NEW_START,	 /* another process_start_time_seconds */
	LIFE_COUNT_BACK, /* a counter went back */
	LIFE_DOWN_UP,	 /* down after ready, and ready again */
};

struct server_life {
	uint32_t instance;	     /* what PONGs say: nonzero */
	bool was_ready;		     /* ready once in this instance */
	bool went_down;		     /* ... and down (LIFE_DOWN) since */
	double started;		     /* its process_start_time_seconds; 0: not known */
	double count[LIFE_COUNTERS]; /* the last read in this life, or LIFE_NO_COUNT */
	double first[LIFE_COUNTERS]; /* the first read in this life, or LIFE_NO_COUNT */
};

void life_init(struct server_life *l, uint32_t instance);
/* One reading. Not LIFE_SAME when it shows a restart: the caller then
 * gives the server a new instance (kvs_new_instance()). */
enum life_verdict life_seen(struct server_life *l, const struct life_reading *r);
/* The process has said which it is (its start time, a counter grown in
 * this life): a down and up alone no longer decide. */
bool life_said(const struct server_life *l);

#endif
