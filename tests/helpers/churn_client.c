// SPDX-License-Identifier: MIT
/*
 * churn_client: clients that leave mid-stream, for the client-fault test.
 * Each of COUNT clients (PARALLEL at a time) connects, sends one request
 * with a prompt of its own, and then, by its index i:
 *   i % 5 == 0  close:     reads the first frame back, then close()s;
 *   i % 5 == 1  reset:     reads the first frame back, then resets (RST);
 *   i % 5 == 2  halfclose: reads the first frame, shuts down its sending
 *                          side, and reads the rest of the answer, which
 *                          must arrive byte for byte (MAX_TOKENS chunks and
 *                          the END);
 *   i % 5 == 3  early:     close()s before any answer;
 *   i % 5 == 4  shut:      shuts down its sending side right after the
 *                          request, perhaps before the gateway accepted it:
 *                          must get the whole answer or an ERROR, never
 *                          silence.
 * Prints one JSON line: {"clients":N,"halfclose":H,"halfclose_ok":K,
 * "shut_answered":A,"shut_errors":E,"failures":F}; exit status 0 if every
 * half-closed client got its whole answer and nothing else failed.
 *
 *   churn_client ADDR:PORT COUNT PARALLEL MAX_TOKENS
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "codec.h"
#include "kvsplice/hash.h"
#include "netutil.h"
#include "prompt.h"

#define PROMPT_TOKENS 256

enum mode { M_CLOSE, M_RESET, M_HALFCLOSE, M_EARLY, M_SHUT, M_MODES };

/* Reads the first frame (whole = 0) or the whole answer; 1 if it was the
 * one expected, 2 if an ERROR, 0 if wrong, -1 on a socket error or EOF.
 * shut: half-close the connection once the first chunk is in. */
static int read_answer(int fd, uint64_t req_id, uint32_t max_tokens, int whole, int shut)
{
	struct kvs_buf rx;
	const uint8_t *frame;
	uint8_t want[KVS_TOKEN_TEXT_LEN];
	struct kvs_msg m;
	uint32_t chunks = 0;
	int rc = -1, st;

	kvs_buf_init(&rx, 1 << 20);
	for (;;) {
		long n = kvs_buf_recv(&rx, fd, 65536);

		if (n <= 0)
			goto out;
		while ((st = kvs_next_frame(&rx, KVS_MAX_PAYLOAD_LIMIT, &m, &frame)) > 0) {
			if (m.type == KVS_T_ERROR) {
				rc = 2;
				goto out;
			}
			if (m.req_id != req_id) {
				rc = 0;
				goto out;
			}
			if (!whole) {
				rc = m.type == KVS_T_CHUNK;
				goto out;
			}
			if (m.type == KVS_T_CHUNK) {
				kvs_token_text(req_id, chunks, want);
				if (m.payload_len != KVS_TOKEN_TEXT_LEN ||
				    memcmp(frame + KVS_HDR_LEN, want, sizeof(want))) {
					rc = 0;
					goto out;
				}
				if (chunks++ == 0 && shut && shutdown(fd, SHUT_WR))
					goto out;
			} else if (m.type == KVS_T_END) {
				rc = chunks == max_tokens;
				goto out;
			}
			kvs_buf_consume(&rx, KVS_HDR_LEN + (size_t)m.payload_len);
		}
		if (st < 0) {
			rc = 0;
			goto out;
		}
	}
out:
	kvs_buf_free(&rx);
	return rc;
}

/* One client; returns read_answer's verdict for its mode (1: as expected). */
static int one_client(const struct kvs_addr *a, uint32_t i, uint32_t max_tokens)
{
	enum mode mode = (enum mode)(i % M_MODES);
	uint8_t prompt[PROMPT_TOKENS * KVS_BYTES_PER_TOKEN];
	struct kvs_msg m = { .type = KVS_T_REQUEST, .req_id = i + 1, .max_tokens = max_tokens };
	struct timeval tv = { .tv_sec = 10 };
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };
	struct kvs_buf tx;
	int fd = kvs_connect(a, 2000), ok = 0;

	if (fd < 0)
		return 0;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	kvs_text_fill(0xc4c40000ull + i, prompt, sizeof(prompt));
	kvs_buf_init(&tx, 0);
	if (kvs_put_frame(&tx, &m, prompt, sizeof(prompt)) ||
	    send(fd, kvs_buf_head(&tx), tx.len, MSG_NOSIGNAL) != (ssize_t)tx.len)
		goto out;
	switch (mode) {
	case M_CLOSE:
		ok = read_answer(fd, m.req_id, max_tokens, 0, 0);
		break;
	case M_RESET:
		ok = read_answer(fd, m.req_id, max_tokens, 0, 0);
		setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
		break;
	case M_HALFCLOSE:
		ok = read_answer(fd, m.req_id, max_tokens, 1, 1);
		break;
	case M_EARLY:
		ok = 1;
		break;
	case M_SHUT:
		ok = shutdown(fd, SHUT_WR) ? 0 : read_answer(fd, m.req_id, max_tokens, 1, 0);
		break;
	default:
		break;
	}
out:
	kvs_buf_free(&tx);
	close(fd);
	return ok;
}

int main(int argc, char **argv)
{
	uint32_t count, parallel, max_tokens, w, i, hc = 0, hc_ok = 0, failures = 0;
	uint32_t shut_ok = 0, shut_err = 0;
	struct kvs_addr a;
	int(*pipes)[2];

	if (argc != 5 || kvs_parse_addr(argv[1], &a)) {
		fprintf(stderr, "usage: churn_client ADDR:PORT COUNT PARALLEL MAX_TOKENS\n");
		return 2;
	}
	count = (uint32_t)strtoul(argv[2], NULL, 10);
	parallel = (uint32_t)strtoul(argv[3], NULL, 10);
	max_tokens = (uint32_t)strtoul(argv[4], NULL, 10);
	if (!parallel || parallel > 256)
		parallel = 1;
	pipes = calloc(parallel, sizeof(*pipes));
	/* Worker w runs clients w, w + P, ...: each reports its tallies. */
	for (w = 0; w < parallel; w++) {
		if (pipe(pipes[w]))
			return 1;
		if (fork() == 0) {
			uint32_t t[5] = { 0 };

			close(pipes[w][0]);
			for (i = w; i < count; i += parallel) {
				int ok = one_client(&a, i, max_tokens);

				if (i % M_MODES == M_HALFCLOSE) {
					t[0]++;
					t[1] += ok == 1;
				} else if (i % M_MODES == M_SHUT) {
					t[3] += ok == 1;
					t[4] += ok == 2;
					t[2] += ok != 1 && ok != 2;
				} else if (ok != 1) {
					t[2]++;
				}
			}
			if (write(pipes[w][1], t, sizeof(t)) != sizeof(t))
				_exit(1);
			_exit(0);
		}
		close(pipes[w][1]);
	}
	for (w = 0; w < parallel; w++) {
		uint32_t t[5] = { 0 };

		if (read(pipes[w][0], t, sizeof(t)) != sizeof(t))
			failures++;
		hc += t[0];
		hc_ok += t[1];
		failures += t[2];
		shut_ok += t[3];
		shut_err += t[4];
		close(pipes[w][0]);
	}
	while (wait(NULL) > 0)
		;
	free(pipes);
	printf("{\"clients\":%u,\"halfclose\":%u,\"halfclose_ok\":%u,\"shut_answered\":%u,"
	       "\"shut_errors\":%u,\"failures\":%u}\n",
	       count, hc, hc_ok, shut_ok, shut_err, failures);
	return hc == hc_ok && !failures ? 0 : 1;
}
