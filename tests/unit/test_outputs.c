// SPDX-License-Identifier: BSD-2-Clause
/*
 * test_outputs.c - report/folded.c and report/svg.c against the hand-built
 * snapshot of outputs_fixture.h (folded text compared exactly; the SVG
 * checked for its frames, sizes, marks and escaping, and parsed by Python's
 * XML parser), util/outfile.c (0600, no symlinks, no hard links), and the
 * command-line options that write them.
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "cmd/cli.h"
#include "outputs_fixture.h"
#include "report/formats.h"
#include "report/xml.h"
#include "util/outfile.h"

static const char folded_all[] = "a<b>&\"c:d (200);0xdeadbeef;bad?name\xff<x>;cuMemAlloc_v2 4096\n"
				 "python3 (100);<module> (train.py:1);train:step (train.py:7);"
				 "forward (/src/net/model.py:42);"
				 "cuMemAllocManaged 1048576\n"
				 "python3 (100);<module> (train.py:1);train:step (train.py:7);"
				 "forward (/src/net/model.py:42);"
				 "libtorch_cuda.so+0x1234;cuMemAlloc_v2 5242880\n";

static const char folded_leaks[] =
	"a<b>&\"c:d (200);0xdeadbeef;bad?name\xff<x>;cuMemAlloc_v2 4096\n"
	"python3 (100);<module> (train.py:1);train:step (train.py:7);"
	"forward (/src/net/model.py:42);"
	"libtorch_cuda.so+0x1234;cuMemAlloc_v2 3145728\n";

static void test_folded_exact(void **state)
{
	struct folded_opts all = { 0 }, leaks = { .leak_only = true };
	struct snapshot empty = { 0 };
	size_t len;
	char *out;

	out = CAPTURE(report__folded(f, &fx_snap, &all), &len);
	assert_string_equal(out, folded_all);
	free(out);
	out = CAPTURE(report__folded(f, &fx_snap, &leaks), &len);
	assert_string_equal(out, folded_leaks);
	free(out);
	out = CAPTURE(report__folded(f, &empty, &all), &len);
	assert_int_equal(len, 0);
	free(out);
}

static void test_frame_names(void **state)
{
	struct snap_frame py = PYTHON(NULL, NULL, 0), bare = { .kind = "native", .address = 0x10 };
	struct snap_frame mod = NATIVE(NULL, "/lib/libz.so.1", NULL, 0xabc);
	char buf[16];

	assert_string_equal(report__frame_name(&py, buf, sizeof(buf)), "? (?:0)");
	assert_string_equal(report__frame_name(&bare, buf, sizeof(buf)), "0x10");
	assert_string_equal(report__frame_name(&mod, buf, sizeof(buf)), "libz.so.1+0xabc");
	assert_string_equal(report__frame_name(&fx_leak_frames[3], buf, 12), "train;st...");
}

static size_t count(const char *hay, const char *needle)
{
	size_t n = 0;

	for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

/* Python's expat must accept the document as well-formed XML. */
static void check_xml(const char *doc, size_t len)
{
	FILE *p = popen("python3 -c 'import sys, xml.etree.ElementTree as E; "
			"E.parse(sys.stdin.buffer)'",
			"w");
	int status;

	assert_non_null(p);
	assert_int_equal(fwrite(doc, 1, len, p), len);
	status = pclose(p);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

/* A frame's name sits 6.5 px above its bottom (rows of 16 px): room for '_' above a leak's
 * outline. */
static __attribute__((noinline)) void check_baseline(const char *svg)
{
	const char *g = strstr(svg, "<g class=\"f"), *r, *t;
	double ry, ty;

	assert_non_null(g);
	r = strstr(g, "<rect x=\"");
	t = strstr(g, "<text x=\"");
	assert_true(r && t);
	r = strstr(r, " y=\"");
	t = strstr(t, " y=\"");
	assert_true(r && t);
	ry = strtod(r + 4, NULL);
	ty = strtod(t + 4, NULL);
	if (ty - ry < 9.4 || ty - ry > 9.6)
		fail_msg("text baseline %.1f px below the frame's top, want 9.5", ty - ry);
}

static void test_svg_frames(void **state)
{
	struct svg_opts o = { .title = "t<&>" };
	size_t len;
	char *out = CAPTURE(report__svg(f, &fx_snap, &o), &len);

	check_xml(out, len);
	assert_int_equal(count(out, "<script"), 1);
	assert_int_equal(count(out, "http"), 2); /* the svg and xhtml namespaces only */
	assert_non_null(strstr(out, ">t&lt;&amp;&gt;</text>"));
	/* all, 7 frames of python3, 4 of the other process */
	assert_int_equal(count(out, "<g class=\"f"), 12);
	assert_non_null(strstr(out, "data-n=\"all\" data-w=\"\" data-x=\"0\" data-v=\"6295552\""));
	assert_non_null(strstr(out, "data-n=\"a&lt;b&gt;&amp;&quot;c;d (200)\""));
	assert_non_null(strstr(out, "data-n=\"bad?name?&lt;x&gt;\""));
	assert_non_null(strstr(out, "data-n=\"train;step (train.py:7)\" data-w=\"Python  "
				    "train.py:7\""));
	assert_non_null(strstr(out, "data-n=\"forward (model.py:42)\" data-w=\"Python  "
				    "/src/net/model.py:42\""));
	/* widest first: python3 starts at 0, the 4 KiB process after its 6 MiB */
	assert_non_null(strstr(out, "data-n=\"python3 (100)\" data-w=\"process\" data-x=\"0\""));
	assert_non_null(strstr(out, "data-x=\"6291456\" data-v=\"4096\" data-d=\"1\""));
	/* the frame that leads to a leak and to unknown stacks says both */
	assert_non_null(strstr(out, "data-c=\"device, host_pinned\" "
				    "data-k=\"leak 3.00 MiB, unknown 2.00 MiB\""));
	assert_non_null(strstr(out, "data-c=\"managed\" data-k=\"steady\""));
	/* marked: the second process and its 3 frames, every byte there a leak */
	assert_int_equal(count(out, "<g class=\"f leak\""), 4);
	assert_null(strstr(out, "cuMemAddressReserve"));
	/* tooltips give the share of the total; names sit clear of the leak outline */
	assert_non_null(strstr(out, "<title>all (6.00 MiB, 100.0% of all)</title>"));
	assert_non_null(strstr(out, "<title>python3 (100) (6.00 MiB, 99.9% of all)</title>"));
	assert_non_null(strstr(out, "height=\"15\" fill="));
	check_baseline(out);
	free(out);

	o = (struct svg_opts){ .leak_only = true };
	out = CAPTURE(report__svg(f, &fx_snap, &o), &len);
	check_xml(out, len);
	assert_non_null(strstr(out, "data-n=\"all\" data-w=\"\" data-x=\"0\" data-v=\"3149824\""));
	assert_null(strstr(out, "cuMemAllocManaged"));
	free(out);
}

/* Whether x comes before y in text, both there. */
static __attribute__((noinline)) bool comes_before(const char *text, const char *x, const char *y)
{
	const char *a = strstr(text, x), *b = strstr(text, y);

	return a && b && a < b;
}

/* top's plain text: processes and stacks in the order of the sort key */
static void test_top_sort(void **state)
{
	struct top_opts o = { .sort_bytes = true };
	struct snap_proc procs[2] = { fx_procs[0], fx_procs[1] };
	struct snapshot snap = fx_snap;
	size_t len;
	char *out;

	/* the second process holds more: first by bytes */
	procs[0].bytes[GL_CLASS_DEVICE] = 1 << 20;
	procs[1].bytes[GL_CLASS_DEVICE] = 8 << 20;
	snap.procs = procs;
	out = CAPTURE(report__top(f, &snap, &o), &len);
	assert_true(comes_before(out, "     200 a<b>", "     100 python3"));
	assert_non_null(strstr(out, "sort: bytes"));
	free(out);
	o = (struct top_opts){ 0 };
	out = CAPTURE(report__top(f, &snap, &o), &len);
	assert_true(comes_before(out, "     100 python3", "     200 a<b>")); /* growth tie: PID */
	free(out);
	o = (struct top_opts){ .sort_name = true };
	out = CAPTURE(report__top(f, &fx_snap, &o), &len);
	assert_true(comes_before(out, "     200 a<b>", "     100 python3")); /* by name */
	assert_non_null(strstr(out, "sort: name"));
	free(out);
}

static void test_xml_escaping(void **state)
{
	/* é, tab, an overlong '/', a surrogate, U+FFFE, a cut 3-byte form, markup */
	static const char in[] = "\xc3\xa9\t\xc0\xaf|\xed\xa0\x80|\xef\xbf\xbe|\xe2\x82<&>\"'\x01";
	size_t len;
	char *out = CAPTURE((xml__put(f, in, SIZE_MAX), 0), &len);

	assert_string_equal(out, "\xc3\xa9\t??|???|???|??&lt;&amp;&gt;&quot;&apos;?");
	free(out);
	out = CAPTURE((xml__put(f, in, 2), 0), &len);
	assert_string_equal(out, "\xc3\xa9\t");
	free(out);
	assert_int_equal(xml__chars("\xc3\xa9t\xff"), 3);
}

static void test_svg_empty(void **state)
{
	struct snapshot empty = { .complete = false };
	size_t len;
	char *out = CAPTURE(report__svg(f, &empty, &(struct svg_opts){ 0 }), &len);

	check_xml(out, len);
	assert_int_equal(count(out, "<g class=\"f"), 1);
	assert_non_null(strstr(out, "INCOMPLETE"));
	assert_non_null(strstr(out, "No outstanding memory."));
	free(out);
}

/* attach --census: a section below the graph, each holder beside its allocation line. */
static void test_svg_census(void **state)
{
	struct snap_census c = {
		.pid = 4242,
		.valid = true,
		.tensors = 61,
		.storages = 61,
		.bytes = 61 << 20,
		.orphan_tensors = 1,
		.orphan_bytes = 1 << 20,
		.paused = true,
		.pause_ns = 2500000,
		.nrows = 2,
		.more_rows = 3,
		.rows = { { "__main__.model.history", "list", 60, 60 << 20, "step (train.py:12)",
			    true },
			  { "__main__.w<&>", "global", 1, 4096, NULL, false } },
	};
	struct snapshot s = fx_snap;
	size_t len;
	char *out;

	s.ncensus = 1;
	s.census = &c;
	out = CAPTURE(report__svg(f, &s, &(struct svg_opts){ 0 }), &len);
	check_xml(out, len);
	assert_non_null(strstr(out,
			       "PID 4242: 61 tensors in 61 storages, 61.00 MiB (paused 2.5 ms); "
			       "1 with no Python holder (1.00 MiB)"));
	assert_non_null(strstr(out, "class=\"census leak\""));
	assert_non_null(strstr(out,
			       "60 tensors, 60.00 MiB, held by __main__.model.history (list) "
			       "\xe2\x86\x90 allocated at step (train.py:12), judged to leak"));
	assert_non_null(strstr(out, "held by __main__.w&lt;&amp;&gt; (global)</text>"));
	assert_non_null(strstr(out, "and 3 more holders"));
	free(out);
	/* no census: no section */
	out = CAPTURE(report__svg(f, &fx_snap, &(struct svg_opts){ 0 }), &len);
	assert_null(strstr(out, "class=\"census"));
	free(out);
}

static char tmpdir[64];

static int make_tmpdir(void **state)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/gpuleak-unit-XXXXXX");
	return mkdtemp(tmpdir) ? 0 : -1;
}

static int remove_tmpdir(void **state)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	return system(cmd);
}

static void path_in_tmp(char *buf, size_t len, const char *name)
{
	assert_true((size_t)snprintf(buf, len, "%s/%s", tmpdir, name) < len);
}

static void write_file(const char *path, const char *text, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	assert_int_equal(fchmod(fd, mode), 0);
	close(fd);
}

static void assert_file(const char *path, const char *text, mode_t mode)
{
	char buf[256] = "";
	struct stat st;
	int fd = open(path, O_RDONLY);
	ssize_t n;

	assert_true(fd >= 0);
	n = read(fd, buf, sizeof(buf) - 1);
	assert_true(n >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	close(fd);
	assert_string_equal(buf, text);
	assert_int_equal(st.st_mode & 07777, mode);
}

static void test_outfile(void **state)
{
	char fresh[128], old[128], victim[128], lnk[128], hard[128];
	FILE *f;

	path_in_tmp(fresh, sizeof(fresh), "fresh");
	path_in_tmp(old, sizeof(old), "old");
	path_in_tmp(victim, sizeof(victim), "victim");
	path_in_tmp(lnk, sizeof(lnk), "link");
	path_in_tmp(hard, sizeof(hard), "hard");

	umask(022);
	f = outfile__open(fresh);
	assert_non_null(f);
	fputs("new", f);
	assert_int_equal(outfile__close(f), 0);
	assert_file(fresh, "new", 0600);

	write_file(old, "a longer old text", 0644);
	f = outfile__open(old);
	assert_non_null(f);
	fputs("short", f);
	assert_int_equal(outfile__close(f), 0);
	assert_file(old, "short", 0600);

	write_file(victim, "precious", 0644);
	assert_int_equal(symlink(victim, lnk), 0);
	errno = 0;
	assert_null(outfile__open(lnk));
	assert_int_equal(errno, ELOOP);
	assert_int_equal(link(victim, hard), 0);
	assert_null(outfile__open(hard));
	assert_int_equal(errno, EMLINK);
	assert_file(victim, "precious", 0644);

	assert_null(outfile__open(tmpdir));
	assert_int_equal(errno, EISDIR);
	f = outfile__open("/dev/null");
	assert_non_null(f);
	assert_int_equal(outfile__close(f), 0);
	assert_ptr_equal(outfile__open("-"), stdout);
	assert_true(outfile__is_stdout("-"));
	assert_false(outfile__is_stdout("./-"));
	assert_int_equal(outfile__close(NULL), 0);
}

/* reserve checks without emptying; refusals of another user's file, a FIFO without a
 * reader, a planted parent link; one file open twice is the same */
static void test_outfile_reserve(void **state)
{
	char old[128], theirs[128], fifo[128], sticky[160], link[192], through[256];
	FILE *a, *b;

	path_in_tmp(old, sizeof(old), "kept");
	path_in_tmp(theirs, sizeof(theirs), "theirs");
	path_in_tmp(fifo, sizeof(fifo), "fifo");
	path_in_tmp(sticky, sizeof(sticky), "sticky");
	write_file(old, "previous report", 0600);
	a = outfile__reserve(old);
	assert_non_null(a);
	assert_file(old, "previous report", 0600);
	b = outfile__reserve(old);
	assert_non_null(b);
	assert_true(outfile__same(a, b));
	assert_int_equal(outfile__close(b), 0);
	assert_int_equal(outfile__begin(a), 0);
	fputs("new", a);
	assert_int_equal(outfile__close(a), 0);
	assert_file(old, "new", 0600);

	write_file(theirs, "theirs", 0666);
	assert_int_equal(chown(theirs, 65534, -1), 0);
	assert_null(outfile__reserve(theirs));
	assert_int_equal(errno, EPERM);

	assert_int_equal(mkfifo(fifo, 0600), 0);
	assert_null(outfile__reserve(fifo));
	assert_int_equal(errno, ENXIO);

	assert_int_equal(mkdir(sticky, 01777), 0);
	assert_int_equal(chmod(sticky, 01777), 0);
	snprintf(link, sizeof(link), "%s/lnk", sticky);
	assert_int_equal(symlink(tmpdir, link), 0);
	assert_int_equal(lchown(link, 65534, -1), 0);
	snprintf(through, sizeof(through), "%s/r.json", link);
	assert_null(outfile__reserve(through));
	assert_int_equal(errno, ENOLINK);
	assert_int_equal(lchown(link, geteuid(), -1), 0);
	a = outfile__reserve(through);
	assert_non_null(a);
	assert_int_equal(outfile__close(a), 0);

	a = outfile__reserve("/dev/null");
	b = outfile__reserve("/dev/null");
	assert_false(outfile__same(a, b));
	outfile__close(a);
	outfile__close(b);
	assert_true(outfile__same(stdout, outfile__reserve("-")));
	(void)state;
}

static int parse(struct gl_opts *o, char **argv)
{
	int argc = 0;

	while (argv[argc])
		argc++;
	return cli__parse(argc, argv, o);
}

static void test_cli_options(void **state)
{
	char *ok[] = { "gpuleak",      "attach",   "--folded",	 "a.folded",	 "--svg",  "-",
		       "--pprof",      "a.pb.gz",  "--json",	 "a.json",	 "--html", "a.html",
		       "--memory-viz", "a.pickle", "--perfetto", "a.trace.json", "42",	   NULL };
	char *two_stdout[] = { "gpuleak", "attach", "--folded", "-", "--json", "-", "42", NULL };
	struct gl_opts o;

	assert_int_equal(parse(&o, ok), EXIT_OK);
	assert_string_equal(o.out[REPORT_FOLDED], "a.folded");
	assert_string_equal(o.out[REPORT_SVG], "-");
	assert_string_equal(o.out[REPORT_PPROF], "a.pb.gz");
	assert_string_equal(o.out[REPORT_JSON], "a.json");
	assert_string_equal(o.out[REPORT_HTML], "a.html");
	assert_string_equal(o.out[REPORT_MEMORY_VIZ], "a.pickle");
	assert_string_equal(o.out[REPORT_PERFETTO], "a.trace.json");
	/* what the engine keeps for them, from the formats' rows */
	assert_int_equal(o.needs, GL_NEED_TIMELINE | GL_NEED_HISTORIES | GL_NEED_MEMORY_EVENTS |
					  GL_NEED_KEEP_AT_EXIT);
	assert_int_equal(parse(&o, two_stdout), EXIT_USAGE);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_folded_exact),
		cmocka_unit_test(test_frame_names),
		cmocka_unit_test(test_svg_frames),
		cmocka_unit_test(test_svg_empty),
		cmocka_unit_test(test_svg_census),
		cmocka_unit_test(test_top_sort),
		cmocka_unit_test(test_xml_escaping),
		cmocka_unit_test_setup_teardown(test_outfile, make_tmpdir, remove_tmpdir),
		cmocka_unit_test_setup_teardown(test_outfile_reserve, make_tmpdir, remove_tmpdir),
		cmocka_unit_test(test_cli_options),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
