// SPDX-License-Identifier: MIT
/* The server's lives, and the instance that names each (life.h). */
#include "life.h"

/* Forget the counters: a new life, not read yet. */
static void forget_counts(struct server_life *l)
{
	for (int i = 0; i < LIFE_COUNTERS; i++)
		l->count[i] = l->first[i] = LIFE_NO_COUNT;
}

void life_init(struct server_life *l, uint32_t instance)
{
	*l = (struct server_life){ .instance = instance };
	forget_counts(l);
}

/* The i-th counter grew since this life's first reading of it: only then
 * does its not going back tell this process from one that started anew
 * (life.h). */
static bool grown(const struct server_life *l, int i)
{
	return l->first[i] >= 0 && l->count[i] > l->first[i];
}

static bool counted(const struct server_life *l)
{
	for (int i = 0; i < LIFE_COUNTERS; i++)
		if (grown(l, i))
			return true;
	return false;
}

bool life_said(const struct server_life *l)
{
	return l->started > 0 || counted(l);
}

/* What a ready reading whose /metrics answered says, by the first
 * authority that can tell (life.h), in *v; false when none can, as what
 * would have told did not read. */
static bool judge(const struct server_life *l, const struct life_reading *r, enum life_verdict *v)
{
	bool compared = false;

	*v = LIFE_SAME;
	if (r->started > 0 && l->started > 0) {
		if (r->started != l->started)
			*v = LIFE_NEW_START;
		return true;
	}
	for (int i = 0; i < LIFE_COUNTERS; i++) {
		if (l->count[i] < 0 || r->count[i] < 0) /* missing */
			continue;
		if (r->count[i] < l->count[i]) {
			*v = LIFE_COUNT_BACK;
			return true;
		}
		compared |= grown(l, i);
	}
	if (compared)
		return true;
	if (r->unread && life_said(l))
		return false;
	if (l->went_down)
		*v = LIFE_DOWN_UP;
	return true;
}

/* Remember what the reading said: all of it in a new life, what it has
 * in the same one (a counter missing keeps its last value); a counter's
 * first value in this life is where it starts. */
static void keep(struct server_life *l, const struct life_reading *r, bool anew)
{
	if (anew || r->started > 0)
		l->started = r->started;
	if (anew)
		forget_counts(l);
	for (int i = 0; i < LIFE_COUNTERS; i++) {
		if (r->count[i] < 0)
			continue;
		if (l->first[i] < 0)
			l->first[i] = r->count[i];
		l->count[i] = r->count[i];
	}
}

enum life_verdict life_seen(struct server_life *l, const struct life_reading *r)
{
	enum life_verdict v;

	if (r->seen == LIFE_SILENT)
		return LIFE_SAME;
	if (r->seen == LIFE_DOWN) {
		/* (not ready before its first ready answer: starting, the
		 * instance it started with is this life's) */
		if (l->was_ready)
			l->went_down = true;
		return LIFE_SAME;
	}
	if (r->metrics && judge(l, r, &v)) {
		keep(l, r, v != LIFE_SAME);
	} else if (life_said(l)) {
		/* the process says, but not this time (no answer, or what
		 * would have said did not read) */
		return LIFE_SAME;
	} else {
		v = l->went_down ? LIFE_DOWN_UP : LIFE_SAME;
		if (v != LIFE_SAME) /* the counters read were the old process' */
			forget_counts(l);
	}
	l->was_ready = true;
	l->went_down = false;
	return v;
}
