// SPDX-License-Identifier: BSD-2-Clause
/*
 * doc.c - what the tables of commands.c print: `gpuleak help`, `gpuleak
 * SUBCOMMAND --help`, the man page's scdoc source and the bash and zsh
 * completions. Nothing here knows an option or a subcommand by name.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include "commands.h"
#include "gpuleak_abi.h"

#ifndef GPULEAK_VERSION
#define GPULEAK_VERSION "0.1.0"
#endif

#define WIDTH 80
#define OPT_COL 24

static int done(FILE *f)
{
	return fflush(f) || ferror(f) ? -EIO : 0;
}

/* Prints text wrapped at WIDTH, each line indented by indent spaces; "\n\n" ends a paragraph. */
static void wrap(FILE *f, const char *text, int indent)
{
	const char *p = text;
	int col = 0;

	while (*p) {
		size_t n = strcspn(p, " \n");

		if (col && col + 1 + (int)n > WIDTH) {
			fputc('\n', f);
			col = 0;
		}
		if (!col)
			col = fprintf(f, "%*s", indent, "");
		else
			col += fprintf(f, " ");
		col += fprintf(f, "%.*s", (int)n, p);
		p += n;
		if (p[0] == '\n' && p[1] == '\n') {
			fputs("\n\n", f);
			col = 0;
			p += 2;
		} else if (*p) {
			p++;
		}
	}
	if (col)
		fputc('\n', f);
}

/* "-a, --all", "    --json FILE" */
static int option_label(const struct cli_option *op, char *buf, size_t len)
{
	char shortname[8] = "    ";

	if (op->key < 256)
		snprintf(shortname, sizeof(shortname), "-%c, ", op->key);
	return snprintf(buf, len, "%s--%s%s%s", shortname, op->name, op->arg ? " " : "",
			op->arg ? op->arg : "");
}

/* op's help as subcommand c words it (c NULL: the general wording). */
static const char *help_of(const struct cli_command *c, const struct cli_option *op)
{
	for (const struct cli_opt_help *h = c ? c->option_help : NULL; h && h->name; h++)
		if (!strcmp(h->name, op->name))
			return h->help;
	return op->help;
}

static void option_help(FILE *f, const struct cli_command *c, const struct cli_option *op)
{
	char label[64];
	int n = option_label(op, label, sizeof(label));
	const char *p = help_of(c, op);

	fprintf(f, "  %s", label);
	if (n + 3 > OPT_COL)
		fprintf(f, "\n%*s", OPT_COL, "");
	else
		fprintf(f, "%*s", OPT_COL - 2 - n, "");
	for (;;) {
		size_t len = strcspn(p, "\n");

		fprintf(f, "%.*s\n", (int)len, p);
		if (!p[len])
			break;
		p += len + 1;
		fprintf(f, "%*s", OPT_COL, "");
	}
}

/* The forms of a subcommand: "gpuleak attach [options] PID [PID...]" per line. */
static void synopsis(FILE *f, const struct cli_command *c, const char *first, const char *rest)
{
	const char *p = c->operands;
	bool opts = strcmp(c->options, "help") != 0;

	for (int i = 0;; i++) {
		size_t len = strcspn(p, "\n");

		fprintf(f, "%sgpuleak %s%s%s%.*s\n", i ? rest : first, c->name,
			opts ? " [options]" : "", len ? " " : "", (int)len, p);
		if (!p[len])
			break;
		p += len + 1;
	}
}

static bool takes_values(const struct cli_command *c, const char *arg)
{
	for (const struct cli_option *op = cli_options; op->name; op++)
		if (!op->hidden && op->arg && !strcmp(op->arg, arg) && cli__offers(c, op))
			return true;
	return false;
}

static void examples(FILE *f, const struct cli_command *c, const char *indent)
{
	const char *p = c->examples;

	while (p && *p) {
		size_t len = strcspn(p, "\t\n"), what;

		fprintf(f, "%s%.*s\n", indent, (int)len, p);
		p += len;
		if (*p == '\t') {
			what = strcspn(++p, "\n");
			fprintf(f, "%s    %.*s\n", indent, (int)what, p);
			p += what;
		}
		if (*p)
			p++;
	}
}

int doc__help(FILE *f)
{
	fprintf(f, "%s\n\nusage:\n", cli_doc.name_line);
	for (const struct cli_command *c = cli_commands; c->name; c++)
		if (!c->hidden && c->cmd != CMD_HELP && c->cmd != CMD_VERSION &&
		    c->cmd != CMD_COMPLETION)
			synopsis(f, c, "  ", "  ");
	fputs("\nsubcommands:\n", f);
	for (const struct cli_command *c = cli_commands; c->name; c++)
		if (!c->hidden)
			fprintf(f, "  %-12s%s\n", c->name, c->summary);
	fputc('\n', f);
	wrap(f,
	     "Options may come anywhere on the line; -- ends them (for run, they end at "
	     "CMD). 'gpuleak SUBCOMMAND --help' lists a subcommand's options with "
	     "examples; 'man gpuleak' has them all. -h, --help: this text. -V, --version: "
	     "the version.",
	     0);
	fputc('\n', f);
	wrap(f, cli_doc.durations, 0);
	wrap(f, cli_doc.sizes, 0);
	fputs("\nexit status: 0 ok, 1 runtime error, 2 usage error, 3 not a readable recording,\n"
	      "4 missing privileges; run: the command's own status (128 + signal; 127: no\n"
	      "such command, 126: it cannot be run)\n",
	      f);
	return done(f);
}

int doc__command_help(FILE *f, const struct cli_command *c)
{
	bool any = false;

	synopsis(f, c, "usage: ", "       ");
	fputc('\n', f);
	if (c->description) {
		wrap(f, c->description, 0);
		fputc('\n', f);
	}
	for (const struct cli_option *op = cli_options; op->name; op++) {
		if (op->hidden || !cli__offers(c, op))
			continue;
		if (!any)
			fputs("options:\n", f);
		any = true;
		option_help(f, c, op);
	}
	if (takes_values(c, "T") || takes_values(c, "SIZE"))
		fputc('\n', f);
	if (takes_values(c, "T"))
		wrap(f, cli_doc.durations, 0);
	if (takes_values(c, "SIZE"))
		wrap(f, cli_doc.sizes, 0);
	if (c->examples) {
		fputs("\nexamples:\n", f);
		examples(f, c, "  ");
	}
	return done(f);
}

/* Text for scdoc: its markup characters escaped. */
static void scd(FILE *f, const char *s, size_t len)
{
	for (size_t i = 0; i < len && s[i]; i++) {
		if (s[i] == '*' || s[i] == '_' || s[i] == '\\')
			fputc('\\', f);
		fputc(s[i] == '\n' ? ' ' : s[i], f);
	}
}

static void scd_all(FILE *f, const char *s)
{
	scd(f, s, strlen(s));
}

/* Paragraphs ("\n\n" between them) for scdoc. */
static void scd_paragraphs(FILE *f, const char *s)
{
	while (*s) {
		const char *end = strstr(s, "\n\n");
		size_t len = end ? (size_t)(end - s) : strlen(s);

		scd(f, s, len);
		fputs("\n\n", f);
		s += len;
		while (*s == '\n')
			s++;
	}
}

static void man_synopsis(FILE *f, const struct cli_command *c)
{
	const char *p = c->operands;
	bool opts = strcmp(c->options, "help") != 0;

	for (;;) {
		size_t len = strcspn(p, "\n");

		fprintf(f, "*gpuleak %s*%s", c->name, opts ? " [_options_]" : "");
		if (len) {
			fputc(' ', f);
			scd(f, p, len);
		}
		fputs(p[len] ? "++\n" : "\n", f);
		if (!p[len])
			break;
		p += len + 1;
	}
	fputc('\n', f);
}

static void man_examples(FILE *f, const struct cli_command *c)
{
	const char *p = c->examples;

	while (p && *p) {
		size_t len = strcspn(p, "\t\n"), what;

		fputs("```\n$ ", f);
		fprintf(f, "%.*s\n```\n\n", (int)len, p);
		p += len;
		if (*p == '\t') {
			what = strcspn(++p, "\n");
			fputc('\t', f);
			scd(f, p, what);
			fputs("\n\n", f);
			p += what;
		}
		if (*p)
			p++;
	}
}

static void man_option(FILE *f, const struct cli_option *op)
{
	char who[256] = "";
	size_t n = 0;

	if (op->key < 256)
		fprintf(f, "*-%c*, ", op->key);
	fprintf(f, "*--%s*", op->name);
	if (op->arg) {
		fputs(" _", f);
		scd_all(f, op->arg);
		fputc('_', f);
	}
	fputs("\n\t", f);
	scd_all(f, op->help);
	for (const struct cli_command *c = cli_commands; c->name; c++) {
		int w;

		if (c->hidden || !cli__offers(c, op))
			continue;
		w = snprintf(who + n, sizeof(who) - n, "%s%s", n ? ", " : "", c->name);
		if (w < 0 || (size_t)w >= sizeof(who) - n)
			break;
		n += (size_t)w;
	}
	fprintf(f, ". Subcommands: %s.\n\n", who);
}

int doc__man(FILE *f)
{
	const char *p;

	fprintf(f, "gpuleak(1) \"gpuleak %s\"\n\n# NAME\n\n", GPULEAK_VERSION);
	scd_all(f, cli_doc.name_line);
	fputs("\n\n# SYNOPSIS\n\n", f);
	for (const struct cli_command *c = cli_commands; c->name; c++)
		if (!c->hidden)
			man_synopsis(f, c);
	fputs("# DESCRIPTION\n\n", f);
	scd_paragraphs(f, cli_doc.description);
	fputs("# SUBCOMMANDS\n\n", f);
	for (const struct cli_command *c = cli_commands; c->name; c++) {
		bool any = false;

		if (c->hidden)
			continue;
		fprintf(f, "## %s\n\n", c->name);
		man_synopsis(f, c);
		scd_all(f, c->description ? c->description : c->summary);
		fputs("\n\n", f);
		for (const struct cli_option *op = cli_options; op->name; op++) {
			if (op->hidden || !cli__offers(c, op))
				continue;
			fprintf(f, "%s*--%s*", any ? ", " : "Options: ", op->name);
			any = true;
		}
		fputs(any ? ".\n\n" : "", f);
	}
	fputs("# OPTIONS\n\n", f);
	for (const struct cli_option *op = cli_options; op->name; op++)
		if (!op->hidden)
			man_option(f, op);
	fputs("# VALUES\n\n", f);
	scd_paragraphs(f, cli_doc.durations);
	scd_paragraphs(f, cli_doc.sizes);
	fputs("# OVERHEAD\n\n", f);
	scd_paragraphs(f, cli_doc.overhead);
	fputs("# EXIT STATUS\n\n", f);
	for (p = cli_doc.exit_status; *p;) {
		size_t code = strcspn(p, "\t"), len;

		fprintf(f, "*%.*s*\n\t", (int)code, p);
		p += code + 1;
		len = strcspn(p, "\n");
		scd(f, p, len);
		fputs("\n\n", f);
		p += len;
		if (*p)
			p++;
	}
	fputs("# EXAMPLES\n\n", f);
	for (const struct cli_command *c = cli_commands; c->name; c++)
		if (!c->hidden)
			man_examples(f, c);
	fprintf(f, "# SEE ALSO\n\n%s\n", cli_doc.see_also);
	return done(f);
}

/* Space-separated words of every visible option of c: "-a --all -i --interval ..." */
static void option_words(FILE *f, const struct cli_command *c)
{
	bool first = true;

	for (const struct cli_option *op = cli_options; op->name; op++) {
		if (op->hidden || !cli__offers(c, op))
			continue;
		if (op->key < 256)
			fprintf(f, "%s-%c", first ? "" : " ", op->key);
		fprintf(f, "%s--%s", first && op->key >= 256 ? "" : " ", op->name);
		first = false;
	}
}

static const char *bash_value(const struct cli_option *op, char *buf, size_t len)
{
	switch (op->complete) {
	case COMPLETE_FILE: return "compgen -f -- \"$cur\"";
	case COMPLETE_DIR: return "compgen -d -- \"$cur\"";
	case COMPLETE_PID: return "compgen -W \"$(ps -e -o pid= 2>/dev/null)\" -- \"$cur\"";
	case COMPLETE_WORDS:
		snprintf(buf, len, "compgen -W '%s' -- \"$cur\"", op->choices);
		return buf;
	default: return "true";
	}
}

/* The visible subcommands' names, space-separated, between before and after. */
static void subcommand_words(FILE *f, const char *before, const char *after)
{
	bool first = true;

	fputs(before, f);
	for (const struct cli_command *c = cli_commands; c->name; c++) {
		if (c->hidden)
			continue;
		fprintf(f, "%s%s", first ? "" : " ", c->name);
		first = false;
	}
	fputs(after, f);
}

int doc__bash(FILE *f)
{
	char buf[256];

	fputs("# bash completion for gpuleak (gpuleak completion bash; generated from its\n"
	      "# table of subcommands, like gpuleak help and the man page)\n"
	      "_gpuleak()\n{\n"
	      "\tlocal cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}\n"
	      "\tlocal sub=${COMP_WORDS[1]} opts= operand= i w dd= cmd=\n"
	      "\tCOMPREPLY=()\n"
	      "\tif ((COMP_CWORD == 1)); then\n",
	      f);
	subcommand_words(f, "\t\tCOMPREPLY=($(compgen -W '",
			 " -h --help -V --version' -- \"$cur\"))\n");
	fputs("\t\treturn\n\tfi\n\tcase $prev in\n", f);
	for (const struct cli_option *op = cli_options; op->name; op++) {
		if (op->hidden || !op->arg)
			continue;
		fputs("\t", f);
		if (op->key < 256)
			fprintf(f, "-%c|", op->key);
		fprintf(f, "--%s)\n\t\tCOMPREPLY=($(%s))\n\t\treturn\n\t\t;;\n", op->name,
			bash_value(op, buf, sizeof(buf)));
	}
	fputs("\tesac\n\tcase $sub in\n", f);
	for (const struct cli_command *c = cli_commands; c->name; c++) {
		if (c->hidden)
			continue;
		fprintf(f, "\t%s)\n\t\topts='", c->name);
		option_words(f, c);
		fprintf(f, "'\n\t\toperand=%d\n",
			c->operand == COMPLETE_SUBCOMMAND ? COMPLETE_WORDS : c->operand);
		if (c->operand == COMPLETE_WORDS)
			fprintf(f, "\t\twords='%s'\n", c->choices);
		if (c->operand == COMPLETE_SUBCOMMAND)
			subcommand_words(f, "\t\twords='", "'\n");
		fputs("\t\t;;\n", f);
	}
	fputs("\t*)\n\t\treturn\n\t\t;;\n\tesac\n", f);
	/* run's and record's command: the first operand after '--' (or, for run, any) */
	fputs("\tfor ((i = 2; i < COMP_CWORD; i++)); do\n"
	      "\t\tw=${COMP_WORDS[i]}\n"
	      "\t\tif [[ -n $dd || ($operand == 5 && $w != -*) ]]; then\n"
	      "\t\t\tcmd=$i\n\t\t\tbreak\n\t\tfi\n"
	      "\t\t[[ $w == -- ]] && dd=1\n\tdone\n",
	      f);
	fprintf(f,
		"\tif [[ -n $cmd ]]; then\n"
		"\t\tCOMPREPLY=($(compgen -f -- \"$cur\"))\n"
		"\telif [[ $cur == -* && -z $dd ]]; then\n"
		"\t\tCOMPREPLY=($(compgen -W \"$opts\" -- \"$cur\"))\n"
		"\telif [[ -n $dd && ($operand == %d || $operand == %d) ]] || "
		"[[ $operand == %d ]]; then\n"
		"\t\tCOMPREPLY=($(compgen -c -- \"$cur\"))\n"
		"\telif [[ $operand == %d || $operand == %d ]]; then\n"
		"\t\tCOMPREPLY=($(compgen -W \"$(ps -e -o pid= 2>/dev/null)\" -- \"$cur\"))\n"
		"\telif [[ $operand == %d ]]; then\n"
		"\t\tCOMPREPLY=($(compgen -f -- \"$cur\"))\n"
		"\telif [[ $operand == %d ]]; then\n"
		"\t\tCOMPREPLY=($(compgen -W \"$words\" -- \"$cur\"))\n"
		"\tfi\n}\ncomplete -F _gpuleak gpuleak\n",
		COMPLETE_COMMAND, COMPLETE_PIDS_OR_COMMAND, COMPLETE_COMMAND, COMPLETE_PID,
		COMPLETE_PIDS_OR_COMMAND, COMPLETE_FILE, COMPLETE_WORDS);
	return done(f);
}

/* A description for zsh's _arguments: no brackets, colons or quotes. */
static void zsh_text(FILE *f, const char *s)
{
	for (; *s && *s != '\n' && *s != '('; s++) {
		if (strchr("[]:'\\`$", *s))
			continue;
		fputc(*s, f);
	}
}

static void zsh_value(FILE *f, const struct cli_option *op)
{
	if (!op->arg)
		return;
	fprintf(f, ":%s:", op->arg);
	switch (op->complete) {
	case COMPLETE_FILE: fputs("_files", f); break;
	case COMPLETE_DIR: fputs("_files -/", f); break;
	case COMPLETE_PID: fputs("_pids", f); break;
	case COMPLETE_WORDS: fprintf(f, "(%s)", op->choices); break;
	default: fputs(" ", f); break;
	}
}

int doc__zsh(FILE *f)
{
	fputs("#compdef gpuleak\n"
	      "# zsh completion for gpuleak (gpuleak completion zsh; generated from its table\n"
	      "# of subcommands, like gpuleak help and the man page)\n"
	      "_gpuleak() {\n"
	      "\tlocal -a subcommands\n\tsubcommands=(\n",
	      f);
	for (const struct cli_command *c = cli_commands; c->name; c++) {
		if (c->hidden)
			continue;
		fprintf(f, "\t\t'%s:", c->name);
		zsh_text(f, c->summary);
		fputs("'\n", f);
	}
	fputs("\t)\n\tif (( CURRENT == 2 )); then\n"
	      "\t\t_describe -t subcommands 'gpuleak subcommand' subcommands\n\t\treturn\n\tfi\n"
	      "\tlocal sub=$words[2]\n\tshift words\n\t(( CURRENT-- ))\n\tcase $sub in\n",
	      f);
	for (const struct cli_command *c = cli_commands; c->name; c++) {
		if (c->hidden)
			continue;
		fprintf(f, "\t%s)\n\t\t_arguments -s -S", c->name);
		for (const struct cli_option *op = cli_options; op->name; op++) {
			if (op->hidden || !cli__offers(c, op))
				continue;
			fputs(" \\\n\t\t\t", f);
			if (op->key < 256)
				fprintf(f, "'(-%c --%s)'{-%c,--%s%s}'[", op->key, op->name, op->key,
					op->name, op->arg ? "=" : "");
			else
				fprintf(f, "'--%s%s[", op->name, op->arg ? "=" : "");
			zsh_text(f, op->help);
			fputc(']', f);
			zsh_value(f, op);
			fputc('\'', f);
		}
		switch (c->operand) {
		case COMPLETE_PID: fputs(" \\\n\t\t\t'*:PID:_pids'", f); break;
		case COMPLETE_FILE: fputs(" \\\n\t\t\t'1:FILE:_files'", f); break;
		case COMPLETE_WORDS:
			fprintf(f, " \\\n\t\t\t'1:%s:(%s)'", c->name, c->choices);
			break;
		case COMPLETE_SUBCOMMAND:
			subcommand_words(f, " \\\n\t\t\t'1:subcommand:(", ")'");
			break;
		case COMPLETE_COMMAND:
		case COMPLETE_PIDS_OR_COMMAND: fputs(" \\\n\t\t\t'*::command:_normal'", f); break;
		default: break;
		}
		fputs("\n\t\t;;\n", f);
	}
	fputs("\tesac\n}\n_gpuleak \"$@\"\n", f);
	return done(f);
}

int doc__run_help(const struct gl_opts *o)
{
	const struct cli_command *c = o->help_topic ? cli__command(o->help_topic) : NULL;

	if (c ? doc__command_help(stdout, c) : doc__help(stdout))
		return EXIT_RUNTIME;
	return EXIT_OK;
}

int doc__run_version(const struct gl_opts *o)
{
	printf("gpuleak %s (BPF ABI %d)\n", GPULEAK_VERSION, GL_ABI_VERSION);
	return done(stdout) ? EXIT_RUNTIME : EXIT_OK;
}

int doc__run_completion(const struct gl_opts *o)
{
	int err = !strcmp(o->shell, "zsh") ? doc__zsh(stdout) : doc__bash(stdout);

	return err ? EXIT_RUNTIME : EXIT_OK;
}

int doc__run_man(const struct gl_opts *o)
{
	return doc__man(stdout) ? EXIT_RUNTIME : EXIT_OK;
}
