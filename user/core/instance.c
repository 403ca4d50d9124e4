// SPDX-License-Identifier: MIT
/* A backend's instance, drawn at random (instance.h). */
#include "instance.h"

#include <sys/random.h>
#include <time.h>
#include <unistd.h>

uint32_t kvs_new_instance(uint32_t was)
{
	uint32_t v = 0;

	for (int i = 0; i < 16 && (!v || v == was); i++) {
		if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != (ssize_t)sizeof(v)) {
			struct timespec ts;

			clock_gettime(CLOCK_REALTIME, &ts);
			v = (uint32_t)ts.tv_nsec * 2654435761u ^ (uint32_t)ts.tv_sec ^
			    (uint32_t)getpid() << 16;
		}
	}
	if (!v || v == was) /* (never: sixteen draws in a row) */
		v = was + 1 ? was + 1 : 1;
	return v;
}
