// SPDX-License-Identifier: BSD-2-Clause
/*
 * targets_child.c - run's child: started held until the probes are attached,
 * its exec's failure said with the shell's status, its signals forwarded, its
 * status collected.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "loader.h"
#include "targets_int.h"
#include "util/log.h"
#include "util/procfs.h"

/*
 * Waits for the child's exec: EOF on fd means it succeeded. A command that
 * cannot be run is said in one line and ends the session with the shell's
 * status for it: -ENOENT (127: not found) or -ENOEXEC (126: found, cannot be run).
 */
static int child_exec_status(struct targets *s, int fd)
{
	int exec_errno = 0;
	ssize_t n;

	do
		n = read(fd, &exec_errno, sizeof(exec_errno));
	while (n < 0 && errno == EINTR);
	close(fd);
	if (n != sizeof(exec_errno))
		return 0;
	log_error("cannot run %s: %s", s->o.argv[0], strerror(exec_errno));
	waitpid(s->child, NULL, 0);
	s->child_done = true;
	return exec_errno == ENOENT ? -ENOENT : -ENOEXEC;
}

int targets__start_child(struct targets *s)
{
	char path[4096];
	struct cuda_lib *lib;
	int pipefd[2], errfd[2], err = 0, exec_errno;
	char go = 1;

	if (pipe2(pipefd, O_CLOEXEC)) {
		log_error("pipe: %s", strerror(errno));
		return -EIO;
	}
	/* the child's exec error comes back here; a successful exec closes it */
	if (pipe2(errfd, O_CLOEXEC)) {
		log_error("pipe: %s", strerror(errno));
		close(pipefd[0]);
		close(pipefd[1]);
		return -EIO;
	}
	s->child = fork();
	if (s->child < 0) {
		log_error("fork: %s", strerror(errno));
		return -EIO;
	}
	if (s->child == 0) {
		/* wait until the probes are attached; EOF means the tracer died */
		close(pipefd[1]);
		close(errfd[0]);
		if (read(pipefd[0], &go, 1) != 1)
			_exit(127);
		execvp(s->o.argv[0], s->o.argv);
		exec_errno = errno;
		if (write(errfd[1], &exec_errno, sizeof(exec_errno)) != sizeof(exec_errno))
			_exit(127);
		_exit(exec_errno == ENOENT ? 127 : 126);
	}
	close(pipefd[0]);
	close(errfd[1]);
	s->targets[0] = (struct target){ .pid = s->child, .state = T_WAITING };
	s->nr_targets = 1;
	procfs__start_ticks(s->child, &s->targets[0].start_ticks);
	err = tracer__add_target(s->tracer, s->child);
	lib = malloc(sizeof(*lib));
	if (!err && lib) {
		/* a libcuda found by the search below is attached before the child runs; any
		 * other (a wrapper's exec, dlopen) holds the child at its mapping */
		if (s->o.libcuda)
			snprintf(path, sizeof(path), "%s", s->o.libcuda);
		if (!s->o.libcuda &&
		    libcuda__search(s->o.argv[0], getenv("LD_LIBRARY_PATH"), path, sizeof(path))) {
			log_debug(
				"libcuda.so.1 is not on the library path; gpuleak will attach when "
				"%s maps one (held at that mapping until the probes are in)",
				s->o.argv[0]);
		} else if ((err = libcuda__open(path, path, lib))) {
			log_error("cannot read %s: %s (name the driver with --libcuda PATH)", path,
				  libcuda__strerror(lib, err));
		} else {
			err = targets__attach_lib(s, lib, -1);
			if (!err)
				s->targets[0].state = T_ATTACHED;
		}
	}
	free(lib);
	if (err) {
		close(pipefd[1]);
		close(errfd[0]);
		kill(s->child, SIGKILL);
		waitpid(s->child, NULL, 0);
		s->child_done = true;
		return err == -EPERM ? -EPERM : -EIO;
	}
	if (write(pipefd[1], &go, 1) != 1)
		log_warn("could not release %s: %s", s->o.argv[0], strerror(errno));
	close(pipefd[1]);
	return child_exec_status(s, errfd[0]);
}

void targets__reap_child(struct targets *s)
{
	int status;

	if (s->child <= 0 || s->child_done)
		return;
	if (waitpid(s->child, &status, WNOHANG) != s->child)
		return;
	s->child_done = true;
	s->child_status = status;
	if (WIFEXITED(status))
		log_info("%s exited with status %d", s->o.argv[0], WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		log_info("%s was killed by signal %d", s->o.argv[0], WTERMSIG(status));
}

int targets__wait_child(struct targets *s, int *wstatus)
{
	pid_t r;
	int st = 0;

	if (s->child <= 0)
		return -ENOENT;
	if (!s->child_done) {
		while ((r = waitpid(s->child, &st, 0)) < 0 && errno == EINTR)
			;
		if (r != s->child)
			return r < 0 ? -errno : -ECHILD;
		s->child_status = st;
		s->child_done = true;
	}
	*wstatus = s->child_status;
	return 0;
}

void targets__signal_child(struct targets *s, int sig)
{
	if (s->child > 0 && !s->child_done)
		kill(s->child, sig);
}
