// SPDX-License-Identifier: MIT
/*
 * kvs_client: a KVS1 client for the real-server tests. Sends COUNT requests
 * on one connection (all at once), each the prompt read from PROMPT_FILE
 * followed by " #i" when SUFFIX is set, and prints one line per request as
 * its answer ends:
 *   req=I end prompt=P cached=C output=O chunks=K bytes=B backend=ID ttft_ms=T
 *   req=I error code=NAME msg="..."
 * ACTION, after the first CHUNK of request 1:
 *   none    wait for every answer
 *   cancel  send CANCEL for request 1, then wait for every answer
 *   close   close the connection and exit (prints "closed")
 *   hup     shut down the sending side, then reset the connection (a
 *           half-close, then RST) and exit (prints "reset")
 *   dup     (at once) send request 1 again while it is in flight, then
 *           wait for every answer
 * Exit status 0 when every request ended (END or ERROR), 1 otherwise.
 * "kvs_client ADDR:PORT ping [ASK]" sends one PING (its cache_key ASK,
 * default 0: to a gateway, 0 asks for the fleet, s + 1 for backend slot
 * s) and prints its PONG:
 *   pong running=R waiting=W kv=U/T backend=ID flags=F
 *
 *   kvs_client ADDR:PORT PROMPT_FILE COUNT MAX_TOKENS ACTION [SUFFIX]
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "codec.h"
#include "fileio.h"
#include "netutil.h"

struct answer {
	uint32_t chunks;
	uint64_t bytes, first_ns;
	int ended;
};

static int send_frame_key(int fd, uint8_t type, uint64_t req_id, uint64_t cache_key,
			  uint32_t max_tokens, const void *p, uint32_t len)
{
	struct kvs_msg m = {
		.type = type, .req_id = req_id, .cache_key = cache_key, .max_tokens = max_tokens
	};
	struct kvs_buf b;
	int r;

	kvs_buf_init(&b, 0);
	r = kvs_put_frame(&b, &m, p, len) ? -1 : kvs_write_all(fd, kvs_buf_head(&b), b.len);
	kvs_buf_free(&b);
	return r;
}

static int send_frame(int fd, uint8_t type, uint64_t req_id, uint32_t max_tokens, const void *p,
		      uint32_t len)
{
	return send_frame_key(fd, type, req_id, 0, max_tokens, p, len);
}

static void print_end(uint64_t id, const struct answer *a, const uint8_t *p, uint64_t t0)
{
	struct kvs_end_info e;

	kvs_end_decode(p, &e);
	printf("req=%llu end prompt=%u cached=%u output=%u chunks=%u bytes=%llu backend=%u "
	       "ttft_ms=%.1f\n",
	       (unsigned long long)id, e.prompt_tokens, e.cached_tokens, e.output_tokens, a->chunks,
	       (unsigned long long)a->bytes, e.backend_id,
	       a->first_ns ? (double)(a->first_ns - t0) / 1e6 : -1.0);
}

static int ping(int fd, uint64_t ask)
{
	struct kvs_load_info li;
	const uint8_t *frame;
	struct kvs_msg m;
	struct kvs_buf rx;
	int rc = 1;

	kvs_buf_init(&rx, 0);
	if (send_frame_key(fd, KVS_T_PING, 7, ask, 0, NULL, 0))
		goto out;
	while (kvs_buf_recv(&rx, fd, 4096) > 0)
		if (kvs_next_frame(&rx, KVS_MAX_PAYLOAD_LIMIT, &m, &frame) > 0) {
			if (m.type == KVS_T_PONG) {
				kvs_load_decode(frame + KVS_HDR_LEN, &li);
				printf("pong running=%u waiting=%u kv=%u/%u backend=%u flags=%u\n",
				       li.running, li.waiting, li.kv_used_blocks,
				       li.kv_total_blocks, li.backend_id, li.flags);
				rc = 0;
			}
			break;
		}
out:
	kvs_buf_free(&rx);
	close(fd);
	return rc;
}

int main(int argc, char **argv)
{
	struct kvs_addr addr;
	struct answer *ans;
	struct kvs_buf rx;
	const uint8_t *frame;
	struct kvs_msg m;
	uint32_t count, max_tokens, i, ended = 0;
	const char *action;
	char *prompt;
	size_t plen;
	uint64_t t0;
	int fd, st, rc = 1;

	if ((argc == 3 || argc == 4) && !strcmp(argv[2], "ping") &&
	    !kvs_parse_addr(argv[1], &addr)) {
		fd = kvs_connect(&addr, 5000);
		return fd < 0 ? 1 : ping(fd, argc == 4 ? strtoull(argv[3], NULL, 0) : 0);
	}
	if (argc < 6 || kvs_parse_addr(argv[1], &addr)) {
		fprintf(stderr, "usage: kvs_client ADDR:PORT PROMPT_FILE COUNT MAX_TOKENS "
				"none|cancel|close [SUFFIX]\n");
		return 2;
	}
	prompt = kvs_read_file(argv[2], 32, &plen); /* room for the suffix */
	if (!prompt) {
		fprintf(stderr, "kvs_client: %s: %s\n", argv[2], strerror(errno));
		return 2;
	}
	count = (uint32_t)atoi(argv[3]);
	max_tokens = (uint32_t)atoi(argv[4]);
	action = argv[5];
	ans = calloc(count + 1, sizeof(*ans));
	fd = count && ans ? kvs_connect(&addr, 5000) : -EINVAL;
	if (fd < 0) {
		fprintf(stderr, "kvs_client: connect: %s\n", strerror(-fd));
		free(ans);
		free(prompt);
		return 1;
	}
	t0 = kvs_now_ns();
	for (i = 1; i <= count; i++) {
		size_t n = plen;

		if (argc > 6)
			n += (size_t)snprintf(prompt + plen, 32, " #%u", i);
		if (send_frame(fd, KVS_T_REQUEST, i, max_tokens, prompt, (uint32_t)n))
			break;
		if (i == 1 && !strcmp(action, "dup"))
			send_frame(fd, KVS_T_REQUEST, i, max_tokens, prompt, (uint32_t)n);
	}
	kvs_buf_init(&rx, 0);
	while (ended < count) {
		long n = kvs_buf_recv(&rx, fd, 65536);

		if (n <= 0) {
			fprintf(stderr, "kvs_client: connection ended with %u of %u answered\n",
				ended, count);
			goto out;
		}
		while ((st = kvs_next_frame(&rx, KVS_MAX_PAYLOAD_LIMIT, &m, &frame)) > 0) {
			struct answer *a = m.req_id >= 1 && m.req_id <= count ? &ans[m.req_id] :
										NULL;

			if (!a || a->ended) {
				printf("req=%llu stray %s\n", (unsigned long long)m.req_id,
				       kvs_type_name(m.type));
			} else if (m.type == KVS_T_CHUNK) {
				if (!a->chunks++)
					a->first_ns = kvs_now_ns();
				a->bytes += m.payload_len;
				if (m.req_id == 1 && a->chunks == 1 && !strcmp(action, "hup")) {
					struct linger lg = { 1, 0 };

					shutdown(fd, SHUT_WR);
					setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
					printf("reset\n");
					rc = 0;
					goto out;
				}
				if (m.req_id == 1 && a->chunks == 1 && !strcmp(action, "close")) {
					printf("closed\n");
					rc = 0;
					goto out;
				}
				if (m.req_id == 1 && a->chunks == 1 && !strcmp(action, "cancel"))
					send_frame(fd, KVS_T_CANCEL, 1, 0, NULL, 0);
			} else if (m.type == KVS_T_END || m.type == KVS_T_ERROR) {
				a->ended = 1;
				ended++;
				if (m.type == KVS_T_END)
					print_end(m.req_id, a, frame + KVS_HDR_LEN, t0);
				else
					printf("req=%llu error code=%s msg=\"%.*s\"\n",
					       (unsigned long long)m.req_id,
					       kvs_status_name(m.status), (int)m.payload_len,
					       (const char *)frame + KVS_HDR_LEN);
			}
			kvs_buf_consume(&rx, KVS_HDR_LEN + m.payload_len);
		}
		if (st < 0) {
			fprintf(stderr, "kvs_client: bad frame: %s\n", kvs_status_name(-st));
			goto out;
		}
		fflush(stdout);
	}
	rc = 0;
out:
	close(fd);
	kvs_buf_free(&rx);
	free(ans);
	free(prompt);
	return rc;
}
