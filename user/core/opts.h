/* SPDX-License-Identifier: MIT */
/*
 * Option tables: one row per option feeds the command line (getopt_long),
 * the INI file that --config names (every long option is a key) and
 * --help. A row says where its value goes in a target struct (an offset)
 * and how it is checked; nothing here knows whose struct it is.
 *
 *     struct opts { uint32_t pool; const char *dir; int keep; };
 *     static const struct kvs_opt rows[] = {
 *         { "pool", 0, KVS_OPT_U32(struct opts, pool, 1, 16), .arg = "N",
 *           .help = "connections per backend (default {default}, max {max})" },
 *         { "pin-dir", 'p', KVS_OPT_STR(struct opts, dir), .arg = "DIR",
 *           .help = "where maps are pinned" },
 *         { "keep-pins", 0, KVS_OPT_FLAG(struct opts, keep),
 *           .help = "leave the maps pinned after exit" },
 *     };
 *
 * Help text: a '\n' breaks the line where --help breaks it (continuation
 * lines are indented under the text); {default}, {min} and {max} print the
 * row's default (from the set's defaults struct) and bounds. A row without
 * help (an alias) is not listed.
 *
 * A program without a config file (the tools) leaves file_opt and
 * bad_key_hint out and never calls kvs_ini_read.
 *
 * Errors are said on the stream the caller passes (err), never on the
 * global stderr: a reload says them into its log line, kvsplicectl --json
 * into its JSON. --help goes to stdout.
 */
#ifndef KVS_OPTS_H
#define KVS_OPTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum kvs_opt_type {
	KVS_OPT_T_HEADING, /* no option: help is printed as it is */
	KVS_OPT_T_FLAG,	   /* no argument: the int at off becomes 1 */
	KVS_OPT_T_STR,	   /* the const char * at off points to the argument */
	KVS_OPT_T_U32,	   /* a uint32_t in [min, max] (kvs_arg_u32) */
	KVS_OPT_T_U64,	   /* a uint64_t in [min, max] (kvs_arg_u64) */
	KVS_OPT_T_DOUBLE,  /* a double in [dmin, dmax] (kvs_arg_double) */
	KVS_OPT_T_ENUM,	   /* one of words: the int at off becomes its index */
	KVS_OPT_T_LIST,	   /* appends to an array of at most max elements */
	KVS_OPT_T_FUNC,	   /* parse(who, row, value, target + off) */
	KVS_OPT_T_HELP,	   /* prints --help */
};

struct kvs_opt;

/* Parses v into dst (FUNC: target + off; LIST: the new element). 0, or -1
 * after a message on err that starts with who. */
typedef int (*kvs_opt_parse_fn)(FILE *err, const char *who, const struct kvs_opt *o, const char *v,
				void *dst);

struct kvs_opt {
	const char *name;    /* long option and INI key */
	int short_name;	     /* 'l' for -l, or 0 */
	bool short_unlisted; /* --help shows only the long name */
	enum kvs_opt_type type;
	size_t off;
	uint64_t min, max;	  /* U32, U64; LIST: max is the capacity */
	double dmin, dmax;	  /* DOUBLE */
	const char *fmt;	  /* DOUBLE: how {default} prints (NULL: "%g") */
	const char *const *words; /* ENUM: NULL-terminated */
	size_t count_off;	  /* LIST: its uint32_t count */
	size_t elem_size;	  /* LIST */
	kvs_opt_parse_fn parse;	  /* FUNC; LIST: each element */
	const char *unit;	  /* LIST: "at most MAX UNIT" (else "--NAME: at most MAX") */
	bool cli_only;		  /* not an INI key */
	bool given;		  /* the int at given_off becomes 1 when it is set */
	size_t given_off;	  /* (KVS_OPT_GIVEN) */
	const char *arg;	  /* the argument's name in --help; NULL: none */
	const char *help;
};

/* Parse callbacks for values several programs take (KVS_OPT_FUNC): a
 * --log-level word into an enum kvs_log_level, a --release-prefill word
 * ('first-token' or 'end') into an int. */
int kvs_opt_log_level(FILE *err, const char *who, const struct kvs_opt *o, const char *v,
		      void *dst);
int kvs_opt_release_prefill(FILE *err, const char *who, const struct kvs_opt *o, const char *v,
			    void *dst);
/* For list options whose elements are kept as text: v kept in *dst if ok,
 * else "WHO: --NAME: 'V' is not EXPECTED" and -1, so a typo stops the start
 * saying what was expected. */
int kvs_opt_keep_checked(FILE *err, bool ok, const char *who, const struct kvs_opt *o,
			 const char *v, void *dst, const char *expected);
/* An address or CIDR (kvs_cidr_parse), kept as text: --allow, --deny,
 * --front-source, kvsplice-http's --trusted-source. */
int kvs_opt_cidr(FILE *err, const char *who, const struct kvs_opt *o, const char *v, void *dst);

/* Rows several programs have, worded once. */
#define KVS_OPT_ROW_HELP                                                                           \
	{                                                                                          \
		"help", 'h', KVS_OPT_HELP, .help = "this text"                                     \
	}
#define KVS_OPT_ROW_LOG_LEVEL(T, m)                                                                \
	{                                                                                          \
		"log-level", 0, KVS_OPT_FUNC(T, m, kvs_opt_log_level),                             \
			.arg = "LEVEL", .help = "warn, info (default) or debug"                    \
	}
#define KVS_OPT_ROW_PORT_FILE(T, m)                                                                \
	{                                                                                          \
		"port-file", 0, KVS_OPT_STR(T, m),                                                 \
			.arg = "FILE", .help = "write the listening port to FILE once\nlistening"  \
	}

/* An option set's rows: .opts and .nopts from one array. */
#define KVS_OPT_ROWS(r) .opts = (r), .nopts = sizeof(r) / sizeof((r)[0])

/* Row parts: where the value goes and how it is checked. */
#define KVS_OPT_FLAG(T, m) .type = KVS_OPT_T_FLAG, .off = offsetof(T, m)
#define KVS_OPT_STR(T, m) .type = KVS_OPT_T_STR, .off = offsetof(T, m)
#define KVS_OPT_U32(T, m, lo, hi)                                                                  \
	.type = KVS_OPT_T_U32, .off = offsetof(T, m), .min = (lo), .max = (hi)
#define KVS_OPT_U64(T, m, lo, hi)                                                                  \
	.type = KVS_OPT_T_U64, .off = offsetof(T, m), .min = (lo), .max = (hi)
#define KVS_OPT_DOUBLE(T, m, lo, hi)                                                               \
	.type = KVS_OPT_T_DOUBLE, .off = offsetof(T, m), .dmin = (lo), .dmax = (hi)
#define KVS_OPT_ENUM(T, m, ...)                                                                    \
	.type = KVS_OPT_T_ENUM, .off = offsetof(T, m), .words = (const char *const[])              \
	{                                                                                          \
		__VA_ARGS__, NULL                                                                  \
	}
#define KVS_OPT_FUNC(T, m, fn) .type = KVS_OPT_T_FUNC, .off = offsetof(T, m), .parse = (fn)
/* An array m of at most cap elements, its count in n. The first time a
 * list is given in a source (the file, the command line) it replaces what
 * earlier sources gave. */
#define KVS_OPT_LIST(T, m, n, cap, fn)                                                             \
	.type = KVS_OPT_T_LIST, .off = offsetof(T, m), .count_off = offsetof(T, n),                \
	.elem_size = sizeof(((T *)0)->m[0]), .max = (cap), .parse = (fn)
/* In a FUNC's parse: the T whose member m dst is. */
#define KVS_OPT_TARGET(T, m, dst) ((T *)(void *)((char *)(dst)-offsetof(T, m)))
/* Added to a row: the int m of T becomes 1 when the option is given. */
#define KVS_OPT_GIVEN(T, m) .given = true, .given_off = offsetof(T, m)
#define KVS_OPT_HELP .type = KVS_OPT_T_HELP, .cli_only = true
#define KVS_OPT_HEADING(text)                                                                      \
	{                                                                                          \
		.type = KVS_OPT_T_HEADING, .help = (text)                                          \
	}

/* A program's options. */
struct kvs_optset {
	const char *prog; /* messages start with it */
	const struct kvs_opt *opts;
	size_t nopts;
	const void *defaults;	  /* a target holding the defaults, for {default} */
	const char *usage;	  /* --help before the options */
	const char *footer;	  /* and after them */
	const char *file_opt;	  /* "--config": what errors reading the file name */
	const char *bad_key_hint; /* after "unknown key 'K'", in parentheses */
	int help_col;		  /* --help's text column (0: 29) */
	/* --help prints this instead of kvs_opts_usage (a program whose help
	 * says more than its options, and calls kvs_opts_usage for them) */
	void (*print_help)(FILE *f);
	bool help_on_error; /* after getopt's complaint, --help on err (else
			     * "PROG: see --help") */
	bool operands;	    /* words that are not options are the caller's */
};

/*
 * Applies argv[1..argc) to target (getopt_long; argv may be permuted).
 * 0, 1 when --help was printed, or -1 after a message on err (getopt's
 * own complaints too, in its words). With operands, the words that are not
 * options are left in argv[optind..argc); else the first of them is an
 * error.
 */
int kvs_opts_argv(const struct kvs_optset *set, FILE *err, int argc, char **argv, void *target);

/* --help. */
void kvs_opts_usage(const struct kvs_optset *set, FILE *f);

/* Whether -c is one of set's short options and takes an argument: for a
 * scan of argv before kvs_opts_argv (in "-jp DIR", what follows p is its
 * argument, not more options). */
bool kvs_opts_short_takes_arg(const struct kvs_optset *set, int c);

/* An INI file read against a set: its settings, each a row and a value
 * (pointing into text), in file order. */
struct kvs_ini_setting {
	const struct kvs_opt *opt;
	const char *value; /* NULL: a flag given as true */
	int line;
};

struct kvs_ini {
	char *text;
	struct kvs_ini_setting *set;
	int n;
};

/*
 * Reads path: '#' and ';' comments, [sections] (ignored), "key = value"
 * with a set's long option as key (flags take true/yes/on/1 or
 * false/no/off/0). Every line is checked before any is applied. 0, or -1
 * after a message on err naming the file and line. Free *ini either way.
 */
int kvs_ini_read(const struct kvs_optset *set, FILE *err, const char *path, struct kvs_ini *ini);
/* Applies what kvs_ini_read found, in order; errors say "PROG: PATH:LINE". */
int kvs_ini_apply(const struct kvs_optset *set, FILE *err, const struct kvs_ini *ini,
		  const char *path, void *target);
void kvs_ini_free(struct kvs_ini *ini);

#endif
