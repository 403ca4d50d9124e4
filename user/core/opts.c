// SPDX-License-Identifier: MIT
/* Option tables: the command line, the INI file and --help from one table. */
#include "opts.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "args.h"
#include "netutil.h"

#define HELP_COL 29 /* where --help's text column starts, unless the set says */

static bool takes_arg(const struct kvs_opt *o)
{
	return o->type != KVS_OPT_T_FLAG && o->type != KVS_OPT_T_HELP;
}

/* "a", "a or b", "a, b or c". */
static void print_words(FILE *f, const char *const *w)
{
	for (size_t i = 0; w[i]; i++)
		fprintf(f, "%s%s", i == 0 ? "" : w[i + 1] ? ", " : " or ", w[i]);
}

/* {default}, {min} or {max} of row o at *p (advanced past it); false if
 * *p is none of them. */
static bool print_token(FILE *f, const struct kvs_optset *set, const struct kvs_opt *o,
			const char **p)
{
	const char *s = *p;

	if (!strncmp(s, "{default}", 9) && set->defaults) {
		const void *def = (const char *)set->defaults + o->off;

		*p += 9;
		switch (o->type) {
		case KVS_OPT_T_U32:
			return fprintf(f, "%u", *(const uint32_t *)def), true;
		case KVS_OPT_T_U64:
			return fprintf(f, "%" PRIu64, *(const uint64_t *)def), true;
		case KVS_OPT_T_DOUBLE:
			return fprintf(f, o->fmt ? o->fmt : "%g", *(const double *)def), true;
		case KVS_OPT_T_STR:
			return fputs(*(const char *const *)def ? *(const char *const *)def : "none",
				     f),
			       true;
		case KVS_OPT_T_ENUM:
			return fputs(o->words[*(const int *)def], f), true;
		default:
			*p -= 9;
			return false;
		}
	}
	if (!strncmp(s, "{min}", 5) || !strncmp(s, "{max}", 5)) {
		bool max = s[2] == 'a';

		*p += 5;
		if (o->type == KVS_OPT_T_DOUBLE)
			fprintf(f, "%g", max ? o->dmax : o->dmin);
		else
			fprintf(f, "%" PRIu64, max ? o->max : o->min);
		return true;
	}
	return false;
}

void kvs_opts_usage(const struct kvs_optset *set, FILE *f)
{
	int col = set->help_col ? set->help_col : HELP_COL;

	fputs(set->usage, f);
	for (size_t i = 0; i < set->nopts; i++) {
		const struct kvs_opt *o = &set->opts[i];
		int n;

		if (o->type == KVS_OPT_T_HEADING) {
			fputs(o->help, f);
			continue;
		}
		if (!o->help)
			continue;
		if (o->short_name && !o->short_unlisted)
			n = fprintf(f, "  -%c, --%s", o->short_name, o->name);
		else
			n = fprintf(f, "      --%s", o->name);
		if (o->arg)
			n += fprintf(f, " %s", o->arg);
		fprintf(f, "%*s", n < col ? col - n : 2, "");
		for (const char *p = o->help; *p;) {
			if (*p == '{' && print_token(f, set, o, &p))
				continue;
			if (*p == '\n')
				fprintf(f, "\n%*s", col, "");
			else
				fputc(*p, f);
			p++;
		}
		fputc('\n', f);
	}
	fputs(set->footer, f);
}

/* LIST: appends v, the first time in this source after emptying the list. */
static int append(FILE *err, const char *who, const struct kvs_opt *o, const char *v, void *target,
		  bool *seen)
{
	uint32_t *n = (uint32_t *)((char *)target + o->count_off);
	_Alignas(max_align_t) unsigned char scratch[256];
	void *slot = scratch;

	if (!*seen) {
		*seen = true;
		*n = 0;
	}
	if (*n < o->max)
		slot = (char *)target + o->off + *n * o->elem_size;
	else if (o->elem_size > sizeof(scratch))
		slot = NULL; /* full: nothing to check it into */
	if (slot && o->parse(err, who, o, v, slot))
		return -1;
	if (*n >= o->max) {
		if (o->unit)
			fprintf(err, "%s: at most %" PRIu64 " %s\n", who, o->max, o->unit);
		else
			fprintf(err, "%s: --%s: at most %" PRIu64 "\n", who, o->name, o->max);
		return -1;
	}
	(*n)++;
	return 0;
}

/* --help (on stdout), or after a bad option (on err). */
static void help(const struct kvs_optset *set, FILE *f)
{
	if (set->print_help)
		set->print_help(f);
	else
		kvs_opts_usage(set, f);
}

/* Sets row o from v (NULL: a flag). 0, 1 (help printed) or -1 after a
 * message on err. seen: o has been given in this source already. */
static int set_value(const struct kvs_optset *set, FILE *err, const struct kvs_opt *o,
		     const char *who, const char *v, void *target, bool *seen)
{
	void *dst = (char *)target + o->off;
	char flag[80];

	snprintf(flag, sizeof(flag), "--%s", o->name);
	switch (o->type) {
	case KVS_OPT_T_FLAG:
		*(int *)dst = 1;
		return 0;
	case KVS_OPT_T_STR:
		*(const char **)dst = v;
		return 0;
	case KVS_OPT_T_U32:
		return kvs_arg_u32(err, who, flag, v, (uint32_t)o->min, (uint32_t)o->max, dst);
	case KVS_OPT_T_U64:
		return kvs_arg_u64(err, who, flag, v, o->min, o->max, dst);
	case KVS_OPT_T_DOUBLE:
		return kvs_arg_double(err, who, flag, v, o->dmin, o->dmax, dst);
	case KVS_OPT_T_ENUM:
		for (int i = 0; o->words[i]; i++) {
			if (!strcmp(v, o->words[i])) {
				*(int *)dst = i;
				return 0;
			}
		}
		fprintf(err, "%s: %s: '%s' is not ", who, flag, v);
		print_words(err, o->words);
		fputc('\n', err);
		return -1;
	case KVS_OPT_T_LIST:
		return append(err, who, o, v, target, seen);
	case KVS_OPT_T_FUNC:
		return o->parse(err, who, o, v, dst);
	case KVS_OPT_T_HELP:
		help(set, stdout);
		return 1;
	case KVS_OPT_T_HEADING:
		break;
	}
	return 0;
}

/* set_value, then the row's mark that it was given. */
static int apply(const struct kvs_optset *set, FILE *err, const struct kvs_opt *o, const char *who,
		 const char *v, void *target, bool *seen)
{
	int r = set_value(set, err, o, who, v, target, seen);

	if (!r && o->given)
		*(int *)((char *)target + o->given_off) = 1;
	return r;
}

/* The row getopt_long returned as c (its short name, or 256 + its index),
 * or set->nopts. */
static size_t row_of(const struct kvs_optset *set, int c)
{
	size_t i = 0;

	if (c >= 256)
		return (size_t)c - 256;
	while (i < set->nopts && set->opts[i].short_name != c)
		i++;
	return i;
}

bool kvs_opts_short_takes_arg(const struct kvs_optset *set, int c)
{
	size_t i = row_of(set, c);

	return c > 0 && c < 256 && i < set->nopts && takes_arg(&set->opts[i]);
}

/* A long option's name as given (word less its "--", up to any '='):
 * "option '--WORD' is ambiguous; possibilities: '--A' '--B'" when more than
 * one long option begins so, as getopt says it; else "unrecognized". */
static void say_unknown_long(FILE *err, const char *prog, const char *word, const struct option *lo)
{
	size_t n = strcspn(word + 2, "=");
	const struct option *first = NULL;
	bool ambiguous = false;

	for (const struct option *p = lo; p->name; p++) {
		if (strncmp(p->name, word + 2, n))
			continue;
		if (!first)
			first = p;
		else if (p->has_arg != first->has_arg || p->val != first->val)
			ambiguous = true;
	}
	if (!ambiguous) {
		fprintf(err, "%s: unrecognized option '%s'\n", prog, word);
		return;
	}
	fprintf(err, "%s: option '%s' is ambiguous; possibilities:", prog, word);
	for (const struct option *p = lo; p->name; p++)
		if (!strncmp(p->name, word + 2, n))
			fprintf(err, " '--%s'", p->name);
	fputc('\n', err);
}

/* getopt_long returned '?': what it would have said (opterr), in its words
 * and with argv[0] as it begins them, said on err instead. getopt says
 * them on the global stderr, which a caller that collects messages (a
 * reload into the log, kvsplicectl --json) does not see. The word at
 * fault is argv[optind - 1]; optopt names the option (0: none known). */
static void say_getopt_error(const struct kvs_optset *set, FILE *err, char **argv,
			     const struct option *lo)
{
	const char *word = argv[optind - 1];
	size_t i = optopt ? row_of(set, optopt) : set->nopts;

	if (!optopt)
		say_unknown_long(err, argv[0], word, lo);
	else if (i == set->nopts)
		fprintf(err, "%s: invalid option -- '%c'\n", argv[0], optopt);
	else if (!takes_arg(&set->opts[i]))
		fprintf(err, "%s: option '--%s' doesn't allow an argument\n", argv[0],
			set->opts[i].name);
	else if (word[0] == '-' && word[1] == '-')
		fprintf(err, "%s: option '--%s' requires an argument\n", argv[0],
			set->opts[i].name);
	else
		fprintf(err, "%s: option requires an argument -- '%c'\n", argv[0], optopt);
}

int kvs_opts_argv(const struct kvs_optset *set, FILE *err, int argc, char **argv, void *target)
{
	struct option *lo = calloc(set->nopts + 1, sizeof(*lo));
	char *shorts = calloc(2 * set->nopts + 1, 1);
	bool *seen = calloc(set->nopts + 1, sizeof(*seen));
	size_t n = 0, ns = 0;
	int c, r = 0;

	if (!lo || !shorts || !seen) {
		fprintf(err, "%s: out of memory\n", set->prog);
		r = -1;
		goto out;
	}
	for (size_t i = 0; i < set->nopts; i++) {
		const struct kvs_opt *o = &set->opts[i];

		if (o->type == KVS_OPT_T_HEADING)
			continue;
		lo[n++] = (struct option){ o->name, takes_arg(o) ? required_argument : no_argument,
					   NULL, o->short_name ? o->short_name : 256 + (int)i };
		if (o->short_name) {
			shorts[ns++] = (char)o->short_name;
			if (takes_arg(o))
				shorts[ns++] = ':';
		}
	}
	optind = 0; /* a fresh scan (GNU getopt) */
	opterr = 0; /* its errors are said on err (say_getopt_error) */
	while (!r && (c = getopt_long(argc, argv, shorts, lo, NULL)) != -1) {
		size_t i = c == '?' ? set->nopts : row_of(set, c);

		if (i == set->nopts) {
			if (c == '?')
				say_getopt_error(set, err, argv, lo);
			if (set->help_on_error)
				help(set, err);
			else
				fprintf(err, "%s: see --help\n", set->prog);
			r = -1;
			break;
		}
		r = apply(set, err, &set->opts[i], set->prog, optarg, target, &seen[i]);
	}
	if (!r && optind < argc && !set->operands) {
		fprintf(err, "%s: unexpected argument '%s' (see --help)\n", set->prog,
			argv[optind]);
		r = -1;
	}
out:
	free(lo);
	free(shorts);
	free(seen);
	return r;
}

static bool truth(const char *v, bool *out)
{
	static const char *const yes[] = { "true", "yes", "on", "1" }, *const no[] = { "false",
										       "no", "off",
										       "0" };

	for (size_t i = 0; i < 4; i++) {
		if (!strcasecmp(v, yes[i]) || !strcasecmp(v, no[i])) {
			*out = !strcasecmp(v, yes[i]);
			return true;
		}
	}
	return false;
}

static char *trim(char *s)
{
	char *e;

	while (*s == ' ' || *s == '\t')
		s++;
	e = s + strlen(s);
	while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
		*--e = '\0';
	return s;
}

/* The row a key names, or NULL. */
static const struct kvs_opt *key_row(const struct kvs_optset *set, const char *key)
{
	for (size_t i = 0; i < set->nopts; i++)
		if (set->opts[i].name && !strcmp(set->opts[i].name, key))
			return &set->opts[i];
	return NULL;
}

void kvs_ini_free(struct kvs_ini *ini)
{
	free(ini->text);
	free(ini->set);
	memset(ini, 0, sizeof(*ini));
}

/* One line, trimmed: its setting added to ini, or a message. */
static int ini_line(const struct kvs_optset *set, FILE *err, const char *path, int lineno,
		    char *line, struct kvs_ini *ini)
{
	const struct kvs_opt *o;
	char *eq, *key, *val;
	bool on;

	eq = strchr(line, '=');
	if (!eq) {
		fprintf(err, "%s: %s:%d: expected 'key = value'\n", set->prog, path, lineno);
		return -1;
	}
	*eq = '\0';
	key = trim(line);
	val = trim(eq + 1);
	o = key_row(set, key);
	if (!o || o->cli_only) {
		fprintf(err, "%s: %s:%d: unknown key '%s' (%s)\n", set->prog, path, lineno, key,
			set->bad_key_hint);
		return -1;
	}
	if (!takes_arg(o)) {
		if (!truth(val, &on)) {
			fprintf(err, "%s: %s:%d: %s: '%s' is not true or false\n", set->prog, path,
				lineno, key, val);
			return -1;
		}
		if (!on)
			return 0;
		val = NULL;
	} else if (!*val) {
		fprintf(err, "%s: %s:%d: %s: no value\n", set->prog, path, lineno, key);
		return -1;
	}
	ini->set[ini->n++] = (struct kvs_ini_setting){ o, val, lineno };
	return 0;
}

int kvs_ini_read(const struct kvs_optset *set, FILE *err, const char *path, struct kvs_ini *ini)
{
	FILE *f = fopen(path, "r");
	char *save = NULL;
	int lineno = 0;
	long size;

	memset(ini, 0, sizeof(*ini));
	if (!f) {
		fprintf(err, "%s: %s %s: %s\n", set->prog, set->file_opt, path, strerror(errno));
		return -1;
	}
	if (fseek(f, 0, SEEK_END) || (size = ftell(f)) < 0 || size > (1 << 20) ||
	    fseek(f, 0, SEEK_SET)) {
		fprintf(err, "%s: %s %s: unreadable or over 1 MiB\n", set->prog, set->file_opt,
			path);
		fclose(f);
		return -1;
	}
	ini->text = calloc(1, (size_t)size + 2);
	/* at most a setting a line, and a line is at least two bytes */
	ini->set = calloc((size_t)size / 2 + 2, sizeof(*ini->set));
	if (!ini->text || !ini->set || fread(ini->text, 1, (size_t)size, f) != (size_t)size) {
		fprintf(err, "%s: %s %s: cannot read it\n", set->prog, set->file_opt, path);
		fclose(f);
		return -1;
	}
	fclose(f);
	for (char *p = ini->text; p; p = save) {
		char *line = p;

		save = strchr(p, '\n');
		if (save)
			*save++ = '\0';
		lineno++;
		line = trim(line);
		if (!*line || *line == '#' || *line == ';')
			continue;
		/* a section's name groups, nothing more; but "[limits" or a
		 * key with a stray '[' is a typo that would pass for one */
		if (*line == '[') {
			if (line[strlen(line) - 1] == ']')
				continue;
			fprintf(err, "%s: %s:%d: '%s': a section is [NAME]\n", set->prog, path,
				lineno, line);
			return -1;
		}
		if (ini_line(set, err, path, lineno, line, ini))
			return -1;
	}
	return 0;
}

int kvs_ini_apply(const struct kvs_optset *set, FILE *err, const struct kvs_ini *ini,
		  const char *path, void *target)
{
	bool *seen = calloc(set->nopts + 1, sizeof(*seen));
	char who[600];
	int r = 0;

	if (!seen) {
		fprintf(err, "%s: out of memory\n", set->prog);
		return -1;
	}
	for (int i = 0; i < ini->n && !r; i++) {
		const struct kvs_opt *o = ini->set[i].opt;

		snprintf(who, sizeof(who), "%s: %s:%d", set->prog, path, ini->set[i].line);
		r = apply(set, err, o, who, ini->set[i].value, target, &seen[o - set->opts]);
	}
	free(seen);
	return r;
}

int kvs_opt_keep_checked(FILE *err, bool ok, const char *who, const struct kvs_opt *o,
			 const char *v, void *dst, const char *expected)
{
	if (!ok) {
		fprintf(err, "%s: --%s: '%s' is not %s\n", who, o->name, v, expected);
		return -1;
	}
	*(const char **)dst = v;
	return 0;
}

int kvs_opt_cidr(FILE *err, const char *who, const struct kvs_opt *o, const char *v, void *dst)
{
	uint8_t addr[16];
	uint32_t plen;
	int family;

	return kvs_opt_keep_checked(err, !kvs_cidr_parse(v, &family, addr, &plen), who, o, v, dst,
				    "an address or CIDR (10.0.0.0/8, fd00::/8)");
}

int kvs_opt_log_level(FILE *err, const char *who, const struct kvs_opt *o, const char *v, void *dst)
{
	return kvs_arg_log_level(err, who, v, dst);
}

int kvs_opt_release_prefill(FILE *err, const char *who, const struct kvs_opt *o, const char *v,
			    void *dst)
{
	return kvs_arg_release_prefill(err, who, v, dst);
}
