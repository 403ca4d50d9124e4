// SPDX-License-Identifier: MIT
/* Option tables (opts.h): one table read from argv and from an INI file,
 * checked the same way both times, and printed as --help. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "opts.h"

struct target {
	uint32_t n;
	double f;
	const char *name;
	int flag, mode, odd;
	int items[3];
	uint32_t nitems;
};

static int parse_odd(FILE *err, const char *who, const struct kvs_opt *o, const char *v, void *dst)
{
	int x = atoi(v);

	if (x % 2 == 0) {
		fprintf(err, "%s: --%s: %d is even\n", who, o->name, x);
		return -1;
	}
	*(int *)dst = x;
	return 0;
}

#define T struct target
static const struct kvs_opt rows[] = {
	{ "num", 'n', KVS_OPT_U32(T, n, 1, 10), .arg = "N",
	  .help = "a number (default {default},\nmax {max})" },
	{ "frac", 0, KVS_OPT_DOUBLE(T, f, 0.5, 2.0), .arg = "F", .help = "at least {min}" },
	KVS_OPT_HEADING("\nMore:\n"),
	{ "name", 0, KVS_OPT_STR(T, name), .arg = "S", .help = "{default}" },
	{ "flag", 0, KVS_OPT_FLAG(T, flag), .help = "on" },
	{ "mode", 0, KVS_OPT_ENUM(T, mode, "slow", "fast", "wild"), .arg = "M",
	  .help = "{default} or not" },
	{ "odd", 0, KVS_OPT_FUNC(T, odd, parse_odd), .arg = "K", .help = "odd", .cli_only = true },
	{ "item", 'i', KVS_OPT_LIST(T, items, nitems, 3, parse_odd), .arg = "K",
	  .help = "up to {max}" },
	{ "very-long-option-name", 0, KVS_OPT_FLAG(T, flag), .help = "past the column" },
	{ "help", 'h', KVS_OPT_HELP, .help = "this" },
};
#undef T

static const struct target defaults = { .n = 3, .f = 1.5, .name = "x", .mode = 1 };

static const struct kvs_optset set = {
	.prog = "prog",
	.opts = rows,
	.nopts = sizeof(rows) / sizeof(rows[0]),
	.defaults = &defaults,
	.usage = "Usage: prog\n",
	.footer = "end\n",
	.file_opt = "--config",
	.bad_key_hint = "see --help",
};

static char errbuf[4096];
static FILE *errf;
static int saved_fd;

/* stderr into errbuf, from capture() to captured(). */
static void capture(void)
{
	errf = tmpfile();
	assert_non_null(errf);
	fflush(stderr);
	saved_fd = dup(2);
	dup2(fileno(errf), 2);
}

static void captured(void)
{
	fflush(stderr);
	dup2(saved_fd, 2);
	close(saved_fd);
	rewind(errf);
	errbuf[fread(errbuf, 1, sizeof(errbuf) - 1, errf)] = '\0';
	fclose(errf);
}

/* Runs argv (argv[0] added) from the defaults, its stderr in errbuf. */
static int run(struct target *t, const char **args)
{
	char *argv[16] = { "prog" };
	int argc = 1, r;

	while (*args)
		argv[argc++] = (char *)*args++;
	*t = defaults;
	capture();
	r = kvs_opts_argv(&set, stderr, argc, argv, t);
	captured();
	return r;
}

static void command_line(void **state)
{
	struct target t;

	(void)state;
	assert_int_equal(run(&t, (const char *[]){ "-n", "7", "--frac=0.75", "--name", "y",
						   "--flag", "--mode", "wild", "--odd", "5", "-i",
						   "1", "--item", "3", NULL }),
			 0);
	assert_int_equal(t.n, 7);
	assert_true(t.f == 0.75);
	assert_string_equal(t.name, "y");
	assert_int_equal(t.flag, 1);
	assert_int_equal(t.mode, 2);
	assert_int_equal(t.odd, 5);
	assert_int_equal(t.nitems, 2);
	assert_int_equal(t.items[1], 3);

	assert_int_equal(run(&t, (const char *[]){ "-n", "11", NULL }), -1);
	assert_string_equal(errbuf, "prog: --num: 11 is out of range [1, 10]\n");
	assert_int_equal(run(&t, (const char *[]){ "--frac", "x", NULL }), -1);
	assert_string_equal(errbuf, "prog: --frac: 'x' is not a number\n");
	assert_int_equal(run(&t, (const char *[]){ "--mode", "calm", NULL }), -1);
	assert_string_equal(errbuf, "prog: --mode: 'calm' is not slow, fast or wild\n");
	assert_int_equal(run(&t, (const char *[]){ "--odd", "4", NULL }), -1);
	assert_string_equal(errbuf, "prog: --odd: 4 is even\n");
	assert_int_equal(
		run(&t, (const char *[]){ "-i", "1", "-i", "3", "-i", "5", "-i", "7", NULL }), -1);
	assert_string_equal(errbuf, "prog: --item: at most 3\n");
	assert_int_equal(
		run(&t, (const char *[]){ "-i", "1", "-i", "3", "-i", "5", "-i", "8", NULL }), -1);
	assert_string_equal(errbuf, "prog: --item: 8 is even\n"); /* checked before the count */
	assert_int_equal(run(&t, (const char *[]){ "-n", "2", "stray", NULL }), -1);
	assert_string_equal(errbuf, "prog: unexpected argument 'stray' (see --help)\n");
	assert_int_equal(run(&t, (const char *[]){ "--nope", NULL }), -1);
	assert_non_null(strstr(errbuf, "prog: see --help\n"));
	assert_int_equal(run(&t, (const char *[]){ "-n", NULL }), -1);
	assert_non_null(strstr(errbuf, "prog: see --help\n"));

	/* the short options that take an argument, from the table */
	assert_true(kvs_opts_short_takes_arg(&set, 'n'));
	assert_true(kvs_opts_short_takes_arg(&set, 'i'));
	assert_false(kvs_opts_short_takes_arg(&set, 'h'));
	assert_false(kvs_opts_short_takes_arg(&set, 'x'));
	assert_false(kvs_opts_short_takes_arg(&set, 0));
}

/* getopt's complaints, in its own words (glibc's), on the stream passed
 * and not on the global stderr: what a reload logs and kvsplicectl --json
 * reports. */
static void getopt_words(void **state)
{
	static const struct {
		const char *args[3];
		const char *said;
	} cases[] = {
		{ { "--nope=1" }, "prog: unrecognized option '--nope=1'\n" },
		{ { "--flag=1" }, "prog: option '--flag' doesn't allow an argument\n" },
		{ { "--f" },
		  "prog: option '--f' is ambiguous; possibilities: '--frac' '--flag'\n" },
		{ { "--nu" }, "prog: option '--num' requires an argument\n" },
		{ { "-x" }, "prog: invalid option -- 'x'\n" },
		{ { "-n" }, "prog: option requires an argument -- 'n'\n" },
	};
	struct target t;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *argv[4] = { "prog", (char *)cases[i].args[0] }, *text = NULL;
		size_t len = 0;
		FILE *err = open_memstream(&text, &len);

		assert_non_null(err);
		t = defaults;
		capture();
		assert_int_equal(kvs_opts_argv(&set, err, 2, argv, &t), -1);
		captured();
		fclose(err);
		assert_string_equal(errbuf, "");
		assert_int_equal(strncmp(text, cases[i].said, strlen(cases[i].said)), 0);
		assert_string_equal(text + strlen(cases[i].said), "prog: see --help\n");
		free(text);
	}
}

static void help_text(void **state)
{
	static const char want[] = "Usage: prog\n"
				   "  -n, --num N                a number (default 3,\n"
				   "                             max 10)\n"
				   "      --frac F               at least 0.5\n"
				   "\nMore:\n"
				   "      --name S               x\n"
				   "      --flag                 on\n"
				   "      --mode M               fast or not\n"
				   "      --odd K                odd\n"
				   "  -i, --item K               up to 3\n"
				   "      --very-long-option-name  past the column\n"
				   "  -h, --help                 this\n"
				   "end\n";
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	(void)state;
	assert_non_null(f);
	kvs_opts_usage(&set, f);
	fclose(f);
	assert_string_equal(text, want);
	free(text);
}

static char path[64];

static void write_file(const char *text)
{
	FILE *f;

	snprintf(path, sizeof(path), "/tmp/kvs-opts-test-%d.conf", (int)getpid());
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static void ini_file(void **state)
{
	static const char *const bad[] = {
		"num = 2\nodd = 3\n",  /* a command-line-only option */
		"num = 2\nhelp = 1\n", /* so is --help */
		"nume = 2\n",	       /* not a key */
		"num\n",	       /* no '=' */
		"num =\n",	       /* no value */
		"flag = sure\n",       /* not a truth value */
	};
	struct kvs_ini ini;
	struct target t = defaults;
	char want[160];

	(void)state;
	write_file("# c\n[s]\n num = 4 \nflag = off\nitem = 1\nitem=3\nmode = slow\r\n");
	assert_int_equal(kvs_ini_read(&set, stderr, path, &ini), 0);
	assert_int_equal(ini.n, 4); /* flag = off sets nothing */
	assert_int_equal(ini.set[0].line, 3);
	assert_int_equal(kvs_ini_apply(&set, stderr, &ini, path, &t), 0);
	assert_int_equal(t.n, 4);
	assert_int_equal(t.flag, 0);
	assert_int_equal(t.nitems, 2);
	assert_int_equal(t.mode, 0);
	/* The command line's list replaces the file's. */
	{
		char *argv[] = { "prog", "-i", "5", NULL };

		assert_int_equal(kvs_opts_argv(&set, stderr, 3, argv, &t), 0);
		assert_int_equal(t.nitems, 1);
		assert_int_equal(t.items[0], 5);
		assert_int_equal(t.n, 4);
	}
	kvs_ini_free(&ini);

	/* Every line is checked before any is applied. */
	write_file("num = 99\nwhat = 1\n");
	capture();
	assert_int_equal(kvs_ini_read(&set, stderr, path, &ini), -1);
	captured();
	snprintf(want, sizeof(want), "prog: %s:2: unknown key 'what' (see --help)\n", path);
	assert_string_equal(errbuf, want);
	kvs_ini_free(&ini);
	write_file("num = 2\n\nnum = 99\n");
	assert_int_equal(kvs_ini_read(&set, stderr, path, &ini), 0);
	capture();
	assert_int_equal(kvs_ini_apply(&set, stderr, &ini, path, &t), -1);
	captured();
	snprintf(want, sizeof(want), "prog: %s:3: --num: 99 is out of range [1, 10]\n", path);
	assert_string_equal(errbuf, want);
	kvs_ini_free(&ini);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		write_file(bad[i]);
		assert_int_equal(kvs_ini_read(&set, stderr, path, &ini), -1);
		kvs_ini_free(&ini);
	}
	unlink(path);
	assert_int_equal(kvs_ini_read(&set, stderr, path, &ini), -1);
	kvs_ini_free(&ini);
}

/* What the tools use: U64, GIVEN, a {default} format, an alias not
 * listed, a short name not listed, the help column, a help of their own,
 * --help after a bad option, and operands. */
struct tool {
	uint64_t seed;
	double w;
	uint32_t n;
	int n_given, quiet;
	const char *out;
};

static int parse_n_alias(FILE *err, const char *who, const struct kvs_opt *o, const char *v,
			 void *dst)
{
	struct tool *t = KVS_OPT_TARGET(struct tool, n, dst);

	t->n = (uint32_t)atoi(v);
	t->quiet = 2; /* reached through the target */
	return 0;
}

static int helps;

static void tool_help(FILE *f)
{
	helps++;
	fputs("TOOL HELP\n", f);
}

#define U struct tool
static const struct kvs_opt tool_rows[] = {
	{ "seed", 0, KVS_OPT_U64(U, seed, 0, UINT64_MAX), .arg = "S",
	  .help = "(default {default})" },
	{ "weight", 0, KVS_OPT_DOUBLE(U, w, 0, 100), .fmt = "%.1f", .arg = "W",
	  .help = "default {default}" },
	{ "count", 'c', KVS_OPT_U32(U, n, 1, 9), KVS_OPT_GIVEN(U, n_given), .arg = "N",
	  .help = "at most {max}" },
	{ "number", 0, KVS_OPT_FUNC(U, n, parse_n_alias), .arg = "N" }, /* not listed */
	{ "out", 'o', KVS_OPT_STR(U, out), .short_unlisted = true, .arg = "F", .help = "to F" },
	{ "quiet", 'q', KVS_OPT_FLAG(U, quiet), .help = "hush" },
	{ "help", 'h', KVS_OPT_HELP, .help = "this" },
};
#undef U

static const struct tool tool_defaults = { .seed = 18446744073709551615ull, .w = 16 };

static const struct kvs_optset tool_set = {
	.prog = "tool",
	.opts = tool_rows,
	.nopts = sizeof(tool_rows) / sizeof(tool_rows[0]),
	.defaults = &tool_defaults,
	.usage = "Usage: tool\n",
	.footer = "",
	.help_col = 18,
	.help_on_error = true,
	.operands = true,
};

static int run_tool(const struct kvs_optset *ts, struct tool *t, const char **args)
{
	char *argv[16] = { "tool" };
	int argc = 1, r;

	while (*args)
		argv[argc++] = (char *)*args++;
	*t = tool_defaults;
	capture();
	r = kvs_opts_argv(ts, stderr, argc, argv, t);
	captured();
	return r;
}

static void tool_options(void **state)
{
	static const char want[] = "Usage: tool\n"
				   "      --seed S    (default 18446744073709551615)\n"
				   "      --weight W  default 16.0\n"
				   "  -c, --count N   at most 9\n"
				   "      --out F     to F\n"
				   "  -q, --quiet     hush\n"
				   "  -h, --help      this\n";
	struct kvs_optset own = tool_set;
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	struct tool t;

	(void)state;
	assert_non_null(f);
	kvs_opts_usage(&tool_set, f);
	fclose(f);
	assert_string_equal(text, want);
	free(text);

	assert_int_equal(run_tool(&tool_set, &t,
				  (const char *[]){ "first", "--seed", "18446744073709551615", "-o",
						    "x", "second", "-q", NULL }),
			 0);
	assert_true(t.seed == UINT64_MAX);
	assert_string_equal(t.out, "x");
	assert_int_equal(t.quiet, 1);
	assert_int_equal(t.n_given, 0);
	/* operands: permuted to the end, left for the caller */
	assert_int_equal(optind, 6);
	assert_int_equal(run_tool(&tool_set, &t, (const char *[]){ "-c", "4", NULL }), 0);
	assert_int_equal(t.n, 4);
	assert_int_equal(t.n_given, 1);
	assert_int_equal(run_tool(&tool_set, &t, (const char *[]){ "-c", "10", NULL }), -1);
	assert_string_equal(errbuf, "tool: --count: 10 is out of range [1, 9]\n");
	assert_int_equal(t.n_given, 0); /* not given when it fails */
	assert_int_equal(run_tool(&tool_set, &t, (const char *[]){ "--seed", "-1", NULL }), -1);
	assert_string_equal(errbuf, "tool: --seed: '-1' is not a whole number\n");
	assert_int_equal(run_tool(&tool_set, &t, (const char *[]){ "--number", "7", NULL }), 0);
	assert_int_equal(t.n, 7);
	assert_int_equal(t.quiet, 2);
	/* a bad option: getopt's complaint, then the help on stderr */
	assert_int_equal(run_tool(&tool_set, &t, (const char *[]){ "--nope", NULL }), -1);
	assert_non_null(strstr(errbuf, "unrecognized option '--nope'\nUsage: tool\n"));
	assert_null(strstr(errbuf, "see --help"));

	/* A help of its own, for --help and after a bad option. */
	own.print_help = tool_help;
	helps = 0;
	assert_int_equal(run_tool(&own, &t, (const char *[]){ "-x", NULL }), -1);
	assert_non_null(strstr(errbuf, "TOOL HELP\n"));
	assert_int_equal(helps, 1);
	capture(); /* --help goes to stdout: keep it out of the test's output */
	fflush(stdout);
	{
		int out = dup(1);
		char *argv[] = { "tool", "--help", NULL };

		dup2(2, 1);
		assert_int_equal(kvs_opts_argv(&own, stderr, 2, argv, &t), 1);
		fflush(stdout);
		dup2(out, 1);
		close(out);
	}
	captured();
	assert_string_equal(errbuf, "TOOL HELP\n");
	assert_int_equal(helps, 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(command_line), cmocka_unit_test(getopt_words),
		cmocka_unit_test(help_text),	cmocka_unit_test(ini_file),
		cmocka_unit_test(tool_options),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
