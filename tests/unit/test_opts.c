// SPDX-License-Identifier: MIT
/* Option tables (opts.h): one table read from argv and from an INI file,
 * checked the same way both times, and printed as --help. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
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

static int parse_odd(const char *who, const struct kvs_opt *o, const char *v, void *dst)
{
	int x = atoi(v);

	if (x % 2 == 0) {
		fprintf(stderr, "%s: --%s: %d is even\n", who, o->name, x);
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
	r = kvs_opts_argv(&set, argc, argv, t);
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
	assert_int_equal(kvs_ini_read(&set, path, &ini), 0);
	assert_int_equal(ini.n, 4); /* flag = off sets nothing */
	assert_int_equal(ini.set[0].line, 3);
	assert_int_equal(kvs_ini_apply(&set, &ini, path, &t), 0);
	assert_int_equal(t.n, 4);
	assert_int_equal(t.flag, 0);
	assert_int_equal(t.nitems, 2);
	assert_int_equal(t.mode, 0);
	/* The command line's list replaces the file's. */
	{
		char *argv[] = { "prog", "-i", "5", NULL };

		assert_int_equal(kvs_opts_argv(&set, 3, argv, &t), 0);
		assert_int_equal(t.nitems, 1);
		assert_int_equal(t.items[0], 5);
		assert_int_equal(t.n, 4);
	}
	kvs_ini_free(&ini);

	/* Every line is checked before any is applied. */
	write_file("num = 99\nwhat = 1\n");
	capture();
	assert_int_equal(kvs_ini_read(&set, path, &ini), -1);
	captured();
	snprintf(want, sizeof(want), "prog: %s:2: unknown key 'what' (see --help)\n", path);
	assert_string_equal(errbuf, want);
	kvs_ini_free(&ini);
	write_file("num = 2\n\nnum = 99\n");
	assert_int_equal(kvs_ini_read(&set, path, &ini), 0);
	capture();
	assert_int_equal(kvs_ini_apply(&set, &ini, path, &t), -1);
	captured();
	snprintf(want, sizeof(want), "prog: %s:3: --num: 99 is out of range [1, 10]\n", path);
	assert_string_equal(errbuf, want);
	kvs_ini_free(&ini);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		write_file(bad[i]);
		assert_int_equal(kvs_ini_read(&set, path, &ini), -1);
		kvs_ini_free(&ini);
	}
	unlink(path);
	assert_int_equal(kvs_ini_read(&set, path, &ini), -1);
	kvs_ini_free(&ini);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(command_line),
		cmocka_unit_test(help_text),
		cmocka_unit_test(ini_file),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
