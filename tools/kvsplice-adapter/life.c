// SPDX-License-Identifier: MIT
/* The server's lives, and the instance that names each (life.h). */
#include "life.h"

void life_init(struct server_life *l, uint32_t instance)
{
	*l = (struct server_life){ .instance = instance };
}

bool life_seen(struct server_life *l, enum life_seen seen, double started)
{
	bool restarted;

	if (seen == LIFE_SILENT)
		return false;
	if (seen == LIFE_DOWN) {
		/* (not ready before its first ready answer: starting, the
		 * instance it started with is this life's) */
		if (l->was_ready)
			l->went_down = true;
		return false;
	}
	if (started < 0) {
		if (l->started > 0) /* the process says, but not this time */
			return false;
		started = 0;
	}
	if (started > 0 && l->started > 0)
		restarted = started != l->started; /* the process says */
	else
		restarted = l->went_down;
	if (started > 0)
		l->started = started;
	l->was_ready = true;
	l->went_down = false;
	return restarted;
}
