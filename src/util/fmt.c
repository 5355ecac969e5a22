// SPDX-License-Identifier: BSD-2-Clause
#include <stdio.h>
#include "fmt.h"

const char *fmt_bytes(uint64_t bytes, char *buf, size_t len)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
	double v = bytes;
	int u = 0;

	while (v >= 1024 && u < 5) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, len, "%llu B", (unsigned long long)bytes);
	else
		snprintf(buf, len, "%.2f %s", v, units[u]);
	return buf;
}

void fmt_rate(double v, char *buf, size_t len)
{
	char b[32];

	if (v == 0) {
		snprintf(buf, len, "0");
		return;
	}
	fmt_bytes(u64_of(v < 0 ? -v : v), b, sizeof(b));
	snprintf(buf, len, "%c%.28s/s", v < 0 ? '-' : '+', b);
}
