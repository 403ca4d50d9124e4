/* SPDX-License-Identifier: MIT */
/*
 * Request traces in the JSONL format of traces/README.md, one
 * request per line:
 *   {"timestamp": 0, "input_length": 40160, "output_length": 6,
 *    "hash_ids": [0, 1, 2, ...]}
 * timestamp in ms, lengths in tokens, one id per 512-token block of prompt.
 * Read by kvsplice-bench, in virtual time (sim) and against a live gateway
 * (live), so both replay exactly the same requests.
 */
#ifndef KVS_TRACE_H
#define KVS_TRACE_H

#include <stddef.h>
#include <stdint.h>

/* Tokens of prompt one hash id stands for. */
#define KVS_TRACE_BLOCK_TOKENS 512

struct kvs_trace_req {
	double arrival_ms; /* timestamp / speed */
	uint32_t input_tokens;
	uint32_t output_tokens; /* at least 1: a request generates something */
	uint32_t nids;		/* may be fewer than the prompt's blocks */
	uint64_t *ids;
};

struct kvs_trace {
	uint32_t n;
	struct kvs_trace_req *reqs;
	uint32_t max_input_tokens;
};

/*
 * Reads at most max requests (0: all) of path, arrival times divided by
 * speed. Returns the number read, or -errno with a message naming the file
 * and line in err: a line that is not a trace record is an error, not
 * skipped, since a replay that silently drops requests measures something
 * else. Timestamps must not go back.
 */
int kvs_trace_load(const char *path, uint32_t max, double speed, struct kvs_trace *t, char *err,
		   size_t errlen);
void kvs_trace_free(struct kvs_trace *t);

/*
 * The prompt bytes of a request (input_tokens x KVS_BYTES_PER_TOKEN of
 * them): block k is the text of hash id k alone, so the same id is the same
 * text in every request and a prefix cache keyed on bytes sees exactly the
 * sharing the trace describes. Blocks past the listed ids are the request's
 * own (seeded by req_index). buf must hold input_tokens x 4 bytes.
 */
size_t kvs_trace_prompt(const struct kvs_trace_req *r, uint32_t req_index, uint8_t *buf);

#endif
