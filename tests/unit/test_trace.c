// SPDX-License-Identifier: MIT
/* Trace reading and replay text: the records read are the records written,
 * bad lines are errors naming the line, and equal block ids give equal
 * prompt bytes while different ids do not. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kvsplice/hash.h"
#include "trace.h"

static char *write_tmp(const char *text)
{
	static char path[64];
	FILE *f;
	int fd;

	strcpy(path, "/tmp/kvs-test-trace.XXXXXX");
	fd = mkstemp(path);
	assert_true(fd >= 0);
	f = fdopen(fd, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	return path;
}

static void reads_records(void **state)
{
	char *path = write_tmp(
		"{\"timestamp\": 0, \"input_length\": 1000, \"output_length\": 6, \"hash_ids\": [4, 7]}\n"
		"\n"
		"{\"hash_ids\":[4,9,10],\"timestamp\":250,\"input_length\":1025,\"output_length\":0,"
		"\"extra\":\"ignored\",\"nested\":[1,[2]],\"flag\":true}\n"
		"{\"timestamp\": 250, \"input_length\": 3, \"output_length\": 2, \"hash_ids\": []}\n");
	struct kvs_trace t;
	char err[256];

	(void)state;
	assert_int_equal(kvs_trace_load(path, 0, 2.0, &t, err, sizeof(err)), 3);
	assert_int_equal(t.n, 3);
	assert_true(t.reqs[0].arrival_ms == 0);
	assert_true(t.reqs[1].arrival_ms == 125); /* 250 ms at speed 2 */
	assert_int_equal(t.reqs[0].input_tokens, 1000);
	assert_int_equal(t.reqs[0].output_tokens, 6);
	assert_int_equal(t.reqs[0].nids, 2);
	assert_int_equal(t.reqs[0].ids[1], 7);
	assert_int_equal(t.reqs[1].nids, 3);
	assert_int_equal(t.reqs[1].ids[2], 10);
	assert_int_equal(t.reqs[1].output_tokens, 1); /* something is generated */
	assert_int_equal(t.reqs[2].nids, 0);
	assert_int_equal(t.max_input_tokens, 1025);
	kvs_trace_free(&t);

	/* max limits what is read */
	assert_int_equal(kvs_trace_load(path, 2, 1.0, &t, err, sizeof(err)), 2);
	assert_true(t.reqs[1].arrival_ms == 250);
	kvs_trace_free(&t);
	unlink(path);
}

static void expect_error(const char *text, int want, const char *in_msg)
{
	char *path = write_tmp(text);
	struct kvs_trace t;
	char err[256] = "";

	assert_int_equal(kvs_trace_load(path, 0, 1.0, &t, err, sizeof(err)), want);
	if (!strstr(err, in_msg))
		fail_msg("error '%s' does not name '%s'", err, in_msg);
	assert_int_equal(t.n, 0);
	assert_null(t.reqs);
	unlink(path);
}

static void rejects_bad_lines(void **state)
{
	const char *ok = "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 1, "
			 "\"hash_ids\": [1]}\n";
	char buf[512];

	(void)state;
	snprintf(buf, sizeof(buf), "%s%s", ok, "not json\n");
	expect_error(buf, -EINVAL, ":2: not a trace record");
	expect_error("{\"timestamp\": 0, \"input_length\": 10, \"hash_ids\": [1]}\n", -EINVAL,
		     "missing");
	expect_error("{\"timestamp\": -1, \"input_length\": 10, \"output_length\": 1, "
		     "\"hash_ids\": [1]}\n",
		     -EINVAL, "non-negative");
	expect_error("{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 1, "
		     "\"hash_ids\": [1, 2]}\n",
		     -EINVAL, "more hash_ids");
	expect_error("{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 1, "
		     "\"hash_ids\": [1, -2]}\n",
		     -EINVAL, "hash_ids");
	snprintf(buf, sizeof(buf), "%s%s", ok,
		 "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 1, "
		 "\"hash_ids\": [1]} trailing\n");
	expect_error(buf, -EINVAL, "text after");
	snprintf(
		buf, sizeof(buf), "%s%s",
		"{\"timestamp\": 9, \"input_length\": 10, \"output_length\": 1, \"hash_ids\": [1]}\n",
		ok);
	expect_error(buf, -EINVAL, "back in time");
	expect_error("\n\n", -ENODATA, "no requests");
}

static void missing_file(void **state)
{
	struct kvs_trace t;
	char err[256];

	(void)state;
	assert_int_equal(kvs_trace_load("/nonexistent/trace.jsonl", 0, 1, &t, err, sizeof(err)),
			 -ENOENT);
	assert_non_null(strstr(err, "/nonexistent/trace.jsonl"));
}

static void prompt_bytes_follow_ids(void **state)
{
	uint64_t a_ids[] = { 5, 6 }, b_ids[] = { 5, 8 };
	struct kvs_trace_req a = { .input_tokens = 1100, .nids = 2, .ids = a_ids };
	struct kvs_trace_req b = { .input_tokens = 1024, .nids = 2, .ids = b_ids };
	struct kvs_trace_req c = { .input_tokens = 1100, .nids = 1, .ids = a_ids };
	const size_t blk = KVS_TRACE_BLOCK_TOKENS * KVS_BYTES_PER_TOKEN;
	uint8_t *pa = malloc(1100 * 4), *pb = malloc(1024 * 4), *pc = malloc(1100 * 4);
	uint8_t *pc2 = malloc(1100 * 4);

	(void)state;
	assert_int_equal(kvs_trace_prompt(&a, 0, pa), 1100 * 4);
	assert_int_equal(kvs_trace_prompt(&b, 1, pb), 1024 * 4);
	/* same first id, same first block; different second id, different text */
	assert_memory_equal(pa, pb, blk);
	assert_memory_not_equal(pa + blk, pb + blk, blk);
	/* blocks past the listed ids are the request's own */
	kvs_trace_prompt(&c, 2, pc);
	kvs_trace_prompt(&c, 3, pc2);
	assert_memory_equal(pc, pa, blk);
	assert_memory_not_equal(pc + blk, pa + blk, blk);
	assert_memory_not_equal(pc + 2 * blk, pc2 + 2 * blk, 1100 * 4 - 2 * blk);
	/* and replaying it gives the same bytes */
	kvs_trace_prompt(&c, 2, pc2);
	assert_memory_equal(pc, pc2, 1100 * 4);
	free(pa);
	free(pb);
	free(pc);
	free(pc2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(reads_records),
		cmocka_unit_test(rejects_bad_lines),
		cmocka_unit_test(missing_file),
		cmocka_unit_test(prompt_bytes_follow_ids),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
