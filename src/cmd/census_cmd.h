/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * census_cmd.h - `gpuleak census PID`: every live tensor of a running
 * PyTorch process and what holds it, read from outside (census/).
 */
#ifndef GL_CENSUS_CMD_H
#define GL_CENSUS_CMD_H

/* argv[0] is "census". Returns the process exit status. */
int census_cmd__main(int argc, char **argv);

#endif /* GL_CENSUS_CMD_H */
