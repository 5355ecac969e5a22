# SPDX-License-Identifier: BSD-2-Clause
#
# tests/integration/python.mk - Python frames under every interpreter at hand.
#
#   make test-python-versions   runs the unit test test_python_proc and the integration
#                               tests test_python.py, the inferred callers of threads
#                               without Python (test_frameworks) and the census's walk
#                               (test_census's stand-in) once per CPython 3.10+ found in
#                               $(PYENV_ROOT)/versions (default ~/.pyenv) and once with
#                               /usr/bin/python3; fails if any run fails or no interpreter
#                               was found.
# Included by the top-level Makefile; uses its gpuleak, fakecuda, OUTPUT and PYTHON.

PYENV_ROOT ?= $(HOME)/.pyenv
PY_TEST_INTERPRETERS = $(wildcard /usr/bin/python3) \
	$(sort $(wildcard $(PYENV_ROOT)/versions/3.1[0-9]*/bin/python3))

.PHONY: test-python-versions

test-python-versions: deps
	$(Q)$(MAKE) --no-print-directory gpuleak fakecuda $(BUILD)/tests/test_python_proc
	$(Q)set -e; fails=0; runs=0; \
	for py in $(PY_TEST_INTERPRETERS); do \
		runs=$$((runs + 1)); \
		echo "== $$py ($$($$py --version 2>&1))"; \
		(cd tests/unit && GPULEAK_TEST_PYTHON=$$py ../../$(BUILD)/tests/test_python_proc) \
			|| fails=$$((fails + 1)); \
		GPULEAK_TEST_PYTHON=$$py GPULEAK=$(CURDIR)/gpuleak OUTPUT=$(abspath $(OUTPUT)) \
			$(PYTHON) tests/integration/run.py -k test_python || fails=$$((fails + 1)); \
		GPULEAK_TEST_PYTHON=$$py GPULEAK=$(CURDIR)/gpuleak OUTPUT=$(abspath $(OUTPUT)) \
			$(PYTHON) tests/integration/run.py -k test_worker_thread || fails=$$((fails + 1)); \
		GPULEAK_TEST_PYTHON=$$py GPULEAK=$(CURDIR)/gpuleak OUTPUT=$(abspath $(OUTPUT)) \
			$(PYTHON) tests/integration/run.py -k census_walk_stand_in || fails=$$((fails + 1)); \
	done; \
	echo "test-python-versions: $$runs interpreters, $$fails failed"; \
	test $$runs -gt 0 && test $$fails -eq 0
