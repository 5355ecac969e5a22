// SPDX-License-Identifier: BSD-2-Clause
/*
 * holdbook.c - the book of holds every gpuleak on the host shares (map
 * hold_book, gpuleak_abi.h). Two gpuleaks that meet a process mapping a new
 * libcuda both stop it; each attaches the file, and the process goes on when
 * the last one is done, or at the deadline, whichever comes first. An entry
 * whose gpuleak is gone, or past the deadline, counts for nothing and is
 * taken out by whoever finds it.
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include "gpuleak_abi.h"
#include "holdbook.h"
#include "util/log.h"
#include "util/procfs.h"

#define BPF_FS_MAGIC 0xcafe4a11

/* Whether the gpuleak of an entry still runs: its PID, started when the entry says, and
 * not a zombie (killed, not yet reaped). */
static bool agent_alive(__u32 agent, __u64 ticks)
{
	uint64_t t;
	char state;
	int ppid;

	return procfs__start_ticks(agent, &t) == 0 && t == ticks &&
	       procfs__stat(agent, &ppid, &state) == 0 && state != 'Z' && state != 'X';
}

/* Whether PID is still the process an entry held (not a later one of the same PID). */
static bool same_process(__u32 pid, __u64 start_ns)
{
	return procfs__same_process(pid, start_ns);
}

/* The book's keys, read before any is deleted (a hash map's walk restarts at a
 * deleted key). Returns how many, at most GL_HOLD_BOOK_MAX. */
static int read_keys(int fd, struct gl_hold_key *keys)
{
	struct gl_hold_key k, next;
	int n = 0;

	for (bool first = true; n < GL_HOLD_BOOK_MAX; first = false) {
		if (bpf_map_get_next_key(fd, first ? NULL : &k, &next))
			break;
		keys[n++] = next;
		k = next;
	}
	return n;
}

/*
 * Whether the entry counts: its gpuleak runs, its process is the one held, and it
 * is not older than expired_before (bpf_ktime_get_ns). One that does not is taken out.
 */
static bool entry_counts(int fd, const struct gl_hold_key *k, uint64_t expired_before)
{
	struct gl_hold_val v;

	if (bpf_map_lookup_elem(fd, k, &v))
		return false;
	if (agent_alive(k->agent, v.agent_ticks) && same_process(k->tgid, v.start_ns) &&
	    v.since >= expired_before)
		return true;
	bpf_map_delete_elem(fd, k);
	return false;
}

int holdbook__holders(int fd, __u32 pid, __u32 self, uint64_t expired_before, __u32 *other)
{
	struct gl_hold_key *keys = malloc(GL_HOLD_BOOK_MAX * sizeof(*keys));
	int n, live = 0;

	if (!keys)
		return 0;
	n = read_keys(fd, keys);
	for (int i = 0; i < n; i++) {
		if (keys[i].tgid != pid || keys[i].agent == self)
			continue;
		if (entry_counts(fd, &keys[i], expired_before)) {
			live++;
			if (other)
				*other = keys[i].agent;
		}
	}
	free(keys);
	return live;
}

bool holdbook__let_go(int fd, __u32 pid, __u32 self, uint64_t expired_before, __u32 *other)
{
	struct gl_hold_key k = { .tgid = pid, .agent = self };

	bpf_map_delete_elem(fd, &k);
	if (holdbook__holders(fd, pid, self, expired_before, other) > 0)
		return false;
	kill(pid, SIGCONT);
	return true;
}

void holdbook__sweep(int fd, __u32 self, uint64_t expired_before)
{
	struct gl_hold_key *keys = malloc(GL_HOLD_BOOK_MAX * sizeof(*keys));
	struct gl_hold_val v, mine_v;
	int n;

	if (!keys)
		return;
	n = read_keys(fd, keys);
	for (int i = 0; i < n; i++) {
		struct gl_hold_key k = keys[i], mine = { .tgid = k.tgid, .agent = self };

		if (k.agent == self || bpf_map_lookup_elem(fd, &k, &v))
			continue;
		if (agent_alive(k.agent, v.agent_ticks) && same_process(k.tgid, v.start_ns) &&
		    v.since >= expired_before)
			continue;
		bpf_map_delete_elem(fd, &k);
		/* ended: the process goes on, unless it is gone, or a live gpuleak (this one
		 * included: it continues the process when done) still holds it */
		if (!same_process(k.tgid, v.start_ns) || !bpf_map_lookup_elem(fd, &mine, &mine_v) ||
		    holdbook__holders(fd, k.tgid, self, expired_before, NULL) > 0)
			continue;
		kill(k.tgid, SIGCONT);
	}
	free(keys);
}

/* Whether the map pinned at path can stand for this one (same type and layout). */
static bool pin_fits(int fd)
{
	struct bpf_map_info info = {};
	__u32 len = sizeof(info);

	return bpf_obj_get_info_by_fd(fd, &info, &len) == 0 && info.type == BPF_MAP_TYPE_HASH &&
	       info.key_size == sizeof(struct gl_hold_key) &&
	       info.value_size == sizeof(struct gl_hold_val) &&
	       info.max_entries == GL_HOLD_BOOK_MAX;
}

int holdbook__open_shared(void)
{
	struct statfs fs;
	int fd;

	if (statfs("/sys/fs/bpf", &fs) || fs.f_type != BPF_FS_MAGIC) {
		log_debug("no BPF file system at /sys/fs/bpf: holds are not shared with another "
			  "gpuleak, which may let a held process go before this one has attached");
		return -ENOENT;
	}
	fd = bpf_obj_get(GL_HOLD_BOOK_PIN);
	if (fd < 0)
		return -ENOENT;
	if (!pin_fits(fd)) {
		log_warn("%s is not the book of holds this gpuleak keeps (another version's?): "
			 "holds are not shared with the gpuleaks that use it",
			 GL_HOLD_BOOK_PIN);
		close(fd);
		return -EINVAL;
	}
	return fd;
}

void holdbook__share(int fd)
{
	char dir[] = GL_HOLD_BOOK_PIN;
	struct statfs fs;

	if (statfs("/sys/fs/bpf", &fs) || fs.f_type != BPF_FS_MAGIC)
		return;
	*strrchr(dir, '/') = '\0';
	if (mkdir(dir, 0700) && errno != EEXIST) {
		log_debug("cannot make %s: %s: holds are not shared", dir, strerror(errno));
		return;
	}
	if (bpf_obj_pin(fd, GL_HOLD_BOOK_PIN))
		log_warn("cannot pin the book of holds at %s: %s: holds are not shared with "
			 "another gpuleak, which may let a held process go before this one "
			 "has attached",
			 GL_HOLD_BOOK_PIN, strerror(errno));
}
