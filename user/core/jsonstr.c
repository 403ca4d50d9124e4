// SPDX-License-Identifier: MIT
#include "jsonstr.h"

void kvs_json_str(FILE *f, const char *s, size_t max)
{
	fputc('"', f);
	for (size_t i = 0; i < max && s[i]; i++) {
		if (s[i] == '"' || s[i] == '\\')
			fprintf(f, "\\%c", s[i]);
		else if ((unsigned char)s[i] < 0x20)
			fprintf(f, "\\u%04x", (unsigned char)s[i]);
		else
			fputc(s[i], f);
	}
	fputc('"', f);
}
