// SPDX-License-Identifier: MIT
/*
 * frame_fuzzer: throws random KVS1 streams at a live gateway. Each of CONNS
 * connections (16 at a time) sends 1-8 frames - requests with random
 * prompts and PINGs - then, by a random draw, leaves them intact, flips a
 * few random bytes anywhere (headers included), cuts the stream short, or
 * appends random garbage. What it sent is then judged by the codec: a
 * stream of whole, valid client frames is owed one answer per frame (an
 * END or ERROR per request, a PONG per PING), anything else - a bad
 * header, a backend's frame type, a frame cut short - must make the gateway
 * answer with an ERROR and close. It reads until it has all the answers,
 * the gateway closes, or 1 s passes in silence, and counts what did not go
 * as the codec said ("wrong"). Every byte the gateway sends back must frame
 * as valid KVS1 ("malformed"). Streams asking for more than 64 tokens (a
 * flipped max_tokens) are not judged. Prints {"conns":N,"frames":F,
 * "errors":E,"complete":K,"closed_by_gateway":C,"silent":S,"unjudged":U,
 * "wrong":W,"malformed":M}; exit status 1 if anything was wrong or
 * malformed.
 *
 *   frame_fuzzer ADDR:PORT CONNS SEED
 *   FUZZ_ONLY=I FUZZ_DUMP=FILE frame_fuzzer ...   (connection I alone, its
 *                                                  stream written to FILE)
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

#define PARALLEL 16

struct tally {
	uint32_t frames, errors, closed, silent, complete, unjudged, wrong, malformed;
};

static uint32_t rnd(uint64_t *s, uint32_t n)
{
	return (uint32_t)(kvs_splitmix64(s) % n);
}

static void build(struct kvs_buf *tx, uint64_t *rng, uint32_t conn)
{
	uint32_t nframes = 1 + rnd(rng, 8), i, len;
	uint8_t prompt[4096];

	for (i = 0; i < nframes; i++) {
		struct kvs_msg m = { .req_id = (uint64_t)conn << 8 | i };

		if (rnd(rng, 4) == 0) {
			m.type = KVS_T_PING;
			kvs_put_frame(tx, &m, NULL, 0);
			continue;
		}
		len = rnd(rng, sizeof(prompt));
		kvs_text_fill(kvs_splitmix64(rng), prompt, len);
		m.type = KVS_T_REQUEST;
		m.max_tokens = 1 + rnd(rng, 4);
		m.prefix_len = rnd(rng, 3) == 0 ? rnd(rng, len + 1) : 0;
		m.cache_salt = rnd(rng, 3);
		kvs_put_frame(tx, &m, prompt, len);
	}
	switch (rnd(rng, 4)) {
	case 0: /* intact */
		break;
	case 1: /* a few flipped bytes */
		for (i = 1 + rnd(rng, 4); i > 0; i--)
			kvs_buf_head(tx)[rnd(rng, (uint32_t)tx->len)] ^=
				(uint8_t)(1 + rnd(rng, 255));
		break;
	case 2: /* cut short */
		tx->len = 1 + rnd(rng, (uint32_t)tx->len);
		break;
	case 3: /* garbage after */
		len = 1 + rnd(rng, 200);
		if (!kvs_buf_reserve(tx, len)) {
			for (i = 0; i < len; i++)
				kvs_buf_tail(tx)[i] = (uint8_t)rnd(rng, 256);
			kvs_buf_commit(tx, len);
		}
		break;
	}
}

/* The answers a stream is owed if the codec frames all of it as valid
 * client frames; 0 if the gateway must refuse it; -1 if not judged. */
static int owed_answers(const struct kvs_buf *tx)
{
	struct kvs_buf b = *tx; /* a view: consuming it leaves tx alone */
	const uint8_t *frame;
	struct kvs_msg m;
	int owed = 0, st;

	while ((st = kvs_next_frame(&b, KVS_DEFAULT_MAX_PAYLOAD, &m, &frame)) > 0) {
		if (m.type != KVS_T_REQUEST && m.type != KVS_T_PING)
			return 0;
		if (m.type == KVS_T_REQUEST && m.max_tokens > 64)
			return -1;
		owed++;
		b.off += KVS_HDR_LEN + (size_t)m.payload_len;
		b.len -= KVS_HDR_LEN + (size_t)m.payload_len;
	}
	return st < 0 || b.len ? 0 : owed;
}

static void one(const struct kvs_addr *a, uint32_t conn, uint64_t seed, const char *dump,
		struct tally *t)
{
	uint64_t rng = seed ^ ((uint64_t)conn * 0x9e3779b97f4a7c15ull);
	struct timeval tv = { .tv_sec = 1 };
	uint32_t answered = 0, wrong0 = t->wrong, silent0 = t->silent;
	int owed;
	struct kvs_buf tx, rx;
	const uint8_t *frame;
	struct kvs_msg m;
	int fd = kvs_connect(a, 2000), st;

	if (fd < 0) {
		t->malformed++; /* the gateway must keep accepting */
		return;
	}
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	kvs_buf_init(&tx, 0);
	kvs_buf_init(&rx, 32u << 20);
	build(&tx, &rng, conn);
	owed = owed_answers(&tx);
	if (dump) { /* FUZZ_DUMP=FILE: the stream sent, to replay by hand */
		FILE *f = fopen(dump, "w");

		if (f) {
			fwrite(kvs_buf_head(&tx), 1, tx.len, f);
			fclose(f);
		}
	}
	(void)!send(fd, kvs_buf_head(&tx), tx.len, MSG_NOSIGNAL);
	for (;;) {
		long n = kvs_buf_recv(&rx, fd, 65536);

		if (n == 0 || (n < 0 && n != -EAGAIN && n != -EWOULDBLOCK)) {
			t->closed++;
			t->wrong += owed > 0; /* a valid stream was refused */
			break;
		}
		if (n < 0) {
			t->silent++;
			t->wrong += owed >= 0; /* owed answers, or a close */
			break;
		}
		while ((st = kvs_next_frame(&rx, KVS_MAX_PAYLOAD_LIMIT, &m, &frame)) > 0) {
			t->frames++;
			t->errors += m.type == KVS_T_ERROR;
			answered += m.type != KVS_T_CHUNK;
			kvs_buf_consume(&rx, KVS_HDR_LEN + (size_t)m.payload_len);
		}
		if (owed > 0 && answered >= (uint32_t)owed) {
			t->complete++;
			break;
		}
		if (st < 0) {
			t->malformed++;
			break;
		}
	}
	t->unjudged += owed < 0;
	if (t->wrong != wrong0) /* the seed and conn reproduce it: FUZZ_ONLY=conn */
		fprintf(stderr, "frame_fuzzer: conn %u: owed %d answers, got %u, then %s\n", conn,
			owed, answered, t->silent != silent0 ? "silence" : "a close");
	kvs_buf_free(&tx);
	kvs_buf_free(&rx);
	close(fd);
}

int main(int argc, char **argv)
{
	struct tally all = { 0 };
	struct kvs_addr a;
	uint32_t conns, w;
	uint64_t seed;
	int p[PARALLEL][2];

	if (argc != 4 || kvs_parse_addr(argv[1], &a)) {
		fprintf(stderr, "usage: frame_fuzzer ADDR:PORT CONNS SEED\n");
		return 2;
	}
	conns = (uint32_t)strtoul(argv[2], NULL, 10);
	seed = strtoull(argv[3], NULL, 10);
	for (w = 0; w < PARALLEL; w++) {
		if (pipe(p[w]))
			return 1;
		if (fork() == 0) {
			struct tally t = { 0 };

			close(p[w][0]);
			const char *only = getenv("FUZZ_ONLY"), *dump = getenv("FUZZ_DUMP");

			for (uint32_t i = w; i < conns; i += PARALLEL)
				if (!only || (uint32_t)atoi(only) == i)
					one(&a, i, seed, dump, &t);
			_exit(write(p[w][1], &t, sizeof(t)) == sizeof(t) ? 0 : 1);
		}
		close(p[w][1]);
	}
	for (w = 0; w < PARALLEL; w++) {
		struct tally t = { 0 };

		if (read(p[w][0], &t, sizeof(t)) != sizeof(t))
			t.malformed++;
		all.frames += t.frames;
		all.errors += t.errors;
		all.closed += t.closed;
		all.silent += t.silent;
		all.complete += t.complete;
		all.unjudged += t.unjudged;
		all.wrong += t.wrong;
		all.malformed += t.malformed;
		close(p[w][0]);
	}
	while (wait(NULL) > 0)
		;
	printf("{\"conns\":%u,\"frames\":%u,\"errors\":%u,\"complete\":%u,\"closed_by_gateway\":%u,"
	       "\"silent\":%u,\"unjudged\":%u,\"wrong\":%u,\"malformed\":%u}\n",
	       conns, all.frames, all.errors, all.complete, all.closed, all.silent, all.unjudged,
	       all.wrong, all.malformed);
	return all.malformed || all.wrong ? 1 : 0;
}
