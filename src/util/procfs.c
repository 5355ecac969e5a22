// SPDX-License-Identifier: BSD-2-Clause
/*
 * procfs.c - parsing of /proc/PID/{maps,stat,comm,status}. Every parser takes
 * what a hostile or vanishing process may leave there: short reads, odd
 * names with spaces or parentheses, missing fields.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "procfs.h"
#include "parse.h"

const char *procfs_root = "/proc";

ssize_t read_small_file(const char *path, char *buf, size_t len)
{
	ssize_t n, total = 0;
	int fd;

	if (len == 0)
		return -EINVAL;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	while ((size_t)total < len - 1) {
		n = read(fd, buf + total, len - 1 - total);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			total = -errno;
			break;
		}
		if (n == 0)
			break;
		total += n;
	}
	close(fd);
	if (total >= 0)
		buf[total] = '\0';
	return total;
}

static int hex_field(char **p, char stop, uint64_t *out)
{
	char *s = *p, *end;
	unsigned long long v;

	if (!isxdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 16);
	if (errno || *end != stop)
		return -EINVAL;
	*out = v;
	*p = end + 1;
	return 0;
}

int procfs__parse_map_line(char *line, struct map_entry *e)
{
	static const char deleted[] = " (deleted)";
	uint64_t maj, min;
	char *p = line, *end;
	size_t len;

	memset(e, 0, sizeof(*e));
	if (hex_field(&p, '-', &e->start) || hex_field(&p, ' ', &e->end))
		return -EINVAL;
	if (strlen(p) < 5 || p[4] != ' ')
		return -EINVAL;
	memcpy(e->perms, p, 4);
	e->perms[4] = '\0';
	p += 5;
	if (hex_field(&p, ' ', &e->offset) || hex_field(&p, ':', &maj) || hex_field(&p, ' ', &min))
		return -EINVAL;
	if (maj > 0xfff || min > 0xfffff)
		return -EINVAL;
	e->dev_major = maj;
	e->dev_minor = min;
	if (!isdigit((unsigned char)*p))
		return -EINVAL;
	errno = 0;
	e->inode = strtoull(p, &end, 10);
	if (errno || (*end != ' ' && *end != '\0'))
		return -EINVAL;
	p = end;
	while (*p == ' ')
		p++;
	len = strlen(p);
	if (len > sizeof(deleted) - 1 && !strcmp(p + len - (sizeof(deleted) - 1), deleted)) {
		p[len - (sizeof(deleted) - 1)] = '\0';
		e->deleted = true;
	}
	e->path = p;
	return 0;
}

int procfs__for_each_map(int pid, int (*cb)(const struct map_entry *e, void *ctx), void *ctx)
{
	char path[64], *line = NULL;
	size_t cap = 0;
	ssize_t n;
	FILE *f;
	int ret = 0;

	if (snprintf(path, sizeof(path), "%s/%d/maps", procfs_root, pid) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	f = fopen(path, "re");
	if (!f)
		return -errno;
	while ((n = getline(&line, &cap, f)) > 0) {
		struct map_entry e;

		if (line[n - 1] == '\n')
			line[n - 1] = '\0';
		if (procfs__parse_map_line(line, &e))
			continue;
		ret = cb(&e, ctx);
		if (ret)
			break;
	}
	free(line);
	fclose(f);
	return ret;
}

int procfs__comm(int pid, char *buf, size_t len)
{
	char path[64];
	ssize_t n;

	if (snprintf(path, sizeof(path), "%s/%d/comm", procfs_root, pid) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	n = read_small_file(path, buf, len);
	if (n < 0)
		return (int)n;
	if (n > 0 && buf[n - 1] == '\n')
		buf[n - 1] = '\0';
	return 0;
}

/* Fields after the command name, which may itself hold spaces and parentheses. */
static int stat_fields(int pid, char *buf, size_t len, char **after_comm)
{
	char path[64], *p;
	ssize_t n;

	if (snprintf(path, sizeof(path), "%s/%d/stat", procfs_root, pid) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	n = read_small_file(path, buf, len);
	if (n < 0)
		return (int)n;
	p = strrchr(buf, ')');
	if (!p || p[1] != ' ')
		return -EINVAL;
	*after_comm = p + 2;
	return 0;
}

int procfs__stat(int pid, int *ppid, char *state)
{
	char buf[1024], *p;
	int err = stat_fields(pid, buf, sizeof(buf), &p);

	if (err)
		return err;
	if (sscanf(p, "%c %d", state, ppid) != 2)
		return -EINVAL;
	return 0;
}

int procfs__start_ticks(int pid, uint64_t *ticks)
{
	char buf[1024], *p, *tok, *save = NULL;
	int err = stat_fields(pid, buf, sizeof(buf), &p), field = 3;

	if (err)
		return err;
	/* p starts at field 3 (state); start time is field 22 */
	for (tok = strtok_r(p, " ", &save); tok; tok = strtok_r(NULL, " ", &save), field++) {
		if (field == 22)
			return parse_u64(tok, 0, UINT64_MAX, ticks) ? -EINVAL : 0;
	}
	return -EINVAL;
}

int procfs__flags(int pid, uint64_t *flags)
{
	char buf[1024], *p, *tok, *save = NULL;
	int err = stat_fields(pid, buf, sizeof(buf), &p), field = 3;

	if (err)
		return err;
	/* p starts at field 3 (state); the task's flags (PF_*) are field 9 */
	for (tok = strtok_r(p, " ", &save); tok; tok = strtok_r(NULL, " ", &save), field++) {
		if (field == 9)
			return parse_u64(tok, 0, UINT64_MAX, flags) ? -EINVAL : 0;
	}
	return -EINVAL;
}

bool procfs__same_process(int pid, uint64_t start_ns)
{
	long hz = sysconf(_SC_CLK_TCK);
	uint64_t ticks;

	if (procfs__start_ticks(pid, &ticks))
		return false;
	if (hz <= 0)
		hz = 100;
	return ticks == start_ns / (1000000000ULL / (uint64_t)hz);
}

bool procfs__has_memory(int pid)
{
	char path[64], buf[128], *end;
	ssize_t n;

	if (snprintf(path, sizeof(path), "%s/%d/statm", procfs_root, pid) >= (int)sizeof(path))
		return false;
	n = read_small_file(path, buf, sizeof(buf));
	if (n <= 0)
		return false;
	return strtoull(buf, &end, 10) > 0 && end != buf;
}

int procfs__ns_pid(int pid)
{
	char path[64], buf[4096], *line, *save = NULL, *last;
	int nspid = 0;

	if (snprintf(path, sizeof(path), "%s/%d/status", procfs_root, pid) >= (int)sizeof(path))
		return 0;
	if (read_small_file(path, buf, sizeof(buf)) < 0)
		return 0;
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		if (strncmp(line, "NSpid:", 6))
			continue;
		last = strrchr(line, '\t');
		if (!last)
			last = strrchr(line, ' ');
		if (last && parse_pid(last + 1, &nspid))
			nspid = 0;
		break;
	}
	return nspid;
}

int procfs__for_each_pid(int (*cb)(int pid, void *ctx), void *ctx)
{
	DIR *d = opendir(procfs_root);
	struct dirent *de;
	int ret = 0, pid;

	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		if (parse_pid(de->d_name, &pid))
			continue;
		ret = cb(pid, ctx);
		if (ret)
			break;
	}
	closedir(d);
	return ret;
}

/* The value of name in one NUL-terminated "NAME=value" entry, or NULL. */
static const char *env_value(const char *entry, size_t len, const char *name)
{
	size_t n = strlen(name);

	if (len <= n || strncmp(entry, name, n) || entry[n] != '=')
		return NULL;
	return entry + n + 1;
}

#define ENVIRON_MAX (1 << 20)

int procfs__environ_ints(int pid, const char *const *names, int *vals, int n)
{
	char path[64], *buf = NULL;
	uint64_t seen = 0; /* a bit per name: its first entry is read */
	size_t len = 0;
	int fd = -1, err = 0;

	if (n < 0 || n > 64)
		return -EINVAL;
	for (int i = 0; i < n; i++)
		vals[i] = -1;
	if (snprintf(path, sizeof(path), "%s/%d/environ", procfs_root, pid) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	buf = malloc(ENVIRON_MAX + 1);
	if (!buf)
		return -ENOMEM;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		err = -errno;
		goto cleanup;
	}
	while (len < ENVIRON_MAX) {
		ssize_t r = read(fd, buf + len, ENVIRON_MAX - len);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			err = -errno;
			goto cleanup;
		}
		if (!r)
			break;
		len += (size_t)r;
	}
	buf[len] = '\0';
	for (size_t off = 0; off < len;) {
		size_t elen = strnlen(buf + off, len - off);

		for (int i = 0; i < n; i++) {
			const char *v = env_value(buf + off, elen, names[i]);
			uint32_t x;

			/* the first entry of a name is the one getenv() returns */
			if (!v || (seen & (1ULL << i)))
				continue;
			seen |= 1ULL << i;
			if (!parse_u32(v, 0, INT32_MAX, &x))
				vals[i] = (int)x;
		}
		off += elen + 1;
	}
cleanup:
	if (fd >= 0)
		close(fd);
	free(buf);
	return err;
}

/* The first line of a small file, without its newline. Returns 0 or -errno. */
static int read_line(const char *path, char *buf, size_t len)
{
	ssize_t n = read_small_file(path, buf, len);

	if (n <= 0)
		return n ? (int)n : -ENODATA;
	buf[strcspn(buf, "\n")] = '\0';
	return 0;
}

/* Limits at or above this are cgroup v1's way of saying none. */
#define NO_LIMIT (1ULL << 60)

/* The limit and use in dir (a cgroup's directory) from the files named max and cur. */
static int read_limit(const char *dir, const char *max_file, const char *cur_file, uint64_t *max,
		      uint64_t *current)
{
	char path[PATH_MAX], v[64];

	if (snprintf(path, sizeof(path), "%s/%s", dir, max_file) >= (int)sizeof(path))
		return -ENOENT;
	/* cgroup v2 writes "max" for no limit */
	if (read_line(path, v, sizeof(v)) || parse_u64(v, 1, UINT64_MAX, max) || *max >= NO_LIMIT)
		return -ENOENT;
	snprintf(path, sizeof(path), "%s/%s", dir, cur_file);
	if (read_line(path, v, sizeof(v)) || parse_u64(v, 0, UINT64_MAX, current))
		*current = 0;
	return 0;
}

int procfs__self_memory_limit(uint64_t *max, uint64_t *current)
{
	char cg[4096], dir[PATH_MAX];
	char *line, *save = NULL;
	ssize_t n = read_small_file("/proc/self/cgroup", cg, sizeof(cg));

	if (n <= 0)
		return -ENOENT;
	/* cgroup v1's memory controller ("N:memory:/PATH"), else v2's one line ("0::/PATH") */
	for (line = strtok_r(cg, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *ctl = strchr(line, ':'), *rel = ctl ? strchr(ctl + 1, ':') : NULL;

		if (!rel)
			continue;
		*ctl = '\0';
		*rel++ = '\0';
		if (!strcmp(ctl + 1, "memory") &&
		    snprintf(dir, sizeof(dir), "/sys/fs/cgroup/memory%s", rel) < (int)sizeof(dir))
			return read_limit(dir, "memory.limit_in_bytes", "memory.usage_in_bytes",
					  max, current);
		if (!strcmp(ctl + 1, "") && !strcmp(line, "0") &&
		    snprintf(dir, sizeof(dir), "/sys/fs/cgroup%s", rel) < (int)sizeof(dir) &&
		    !read_limit(dir, "memory.max", "memory.current", max, current))
			return 0;
	}
	return -ENOENT;
}
