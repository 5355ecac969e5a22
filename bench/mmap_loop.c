// SPDX-License-Identifier: BSD-2-Clause
/*
 * mmap_loop.c - the address-space changes every process makes, timed: what
 * gpuleak's kernel hook on the mmap lock (tp_btf/mmap_lock_acquire_returned,
 * the one program that runs for processes it does not trace) costs them.
 *
 *   mmap_loop [--file PATH] [--ops N]
 *
 * Three loads, each N operations, on the calling thread's CPU clock:
 *   file:  mmap(PATH, PROT_READ|PROT_EXEC, MAP_PRIVATE) + munmap, as a dynamic
 *          loader maps a library (the hook reads the file's name here)
 *   anon:  mmap(anonymous) + munmap, as malloc grows its arenas
 *   prot:  mprotect of one page back and forth, as a JIT or a guard page does
 * Prints one line: file_ns=... anon_ns=... prot_ns=... (ns per operation pair).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static double cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static void die(const char *what)
{
	perror(what);
	exit(1);
}

int main(int argc, char **argv)
{
	const char *path = "/proc/self/exe";
	long ops = 100000, page = sysconf(_SC_PAGESIZE);
	double t0, file_ns, anon_ns, prot_ns;
	char *p;
	int fd;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--file") && i + 1 < argc)
			path = argv[++i];
		else if (!strcmp(argv[i], "--ops") && i + 1 < argc)
			ops = strtol(argv[++i], NULL, 10);
		else {
			fprintf(stderr, "usage: mmap_loop [--file PATH] [--ops N]\n");
			return 2;
		}
	}
	if (ops <= 0) {
		fprintf(stderr, "mmap_loop: --ops must be positive\n");
		return 2;
	}
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		die(path);
	t0 = cpu_ns();
	for (long i = 0; i < ops; i++) {
		p = mmap(NULL, page, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
		if (p == MAP_FAILED)
			die("mmap file");
		munmap(p, page);
	}
	file_ns = (cpu_ns() - t0) / ops;
	t0 = cpu_ns();
	for (long i = 0; i < ops; i++) {
		p = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			die("mmap anonymous");
		munmap(p, page);
	}
	anon_ns = (cpu_ns() - t0) / ops;
	p = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		die("mmap anonymous");
	t0 = cpu_ns();
	for (long i = 0; i < ops; i++) {
		if (mprotect(p, page, PROT_READ) || mprotect(p, page, PROT_READ | PROT_WRITE))
			die("mprotect");
	}
	prot_ns = (cpu_ns() - t0) / ops;
	printf("file_ns=%.1f anon_ns=%.1f prot_ns=%.1f ops=%ld\n", file_ns, anon_ns, prot_ns, ops);
	return 0;
}
