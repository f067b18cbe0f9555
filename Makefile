# The README's commands. Each target installs what it needs first, so both work on a fresh clone.
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin

.PHONY: install system-deps lint demo test test-fast test-server bench clean

# uv installs the same packages as pip from the same index (measured on a fresh machine: 14 s
# against 36 s). It trusts the system's certificates, as pip does (a proxy may sign with its own
# authority); where uv cannot be installed or cannot reach the index, pip does the install.
$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check uv \
		&& $(BIN)/uv pip install --quiet --system-certs --python $(BIN)/python -e '.[test]' \
		|| $(BIN)/pip install --quiet --disable-pip-version-check -e '.[test]'
	touch $@

install: $(BIN)/.installed

# The main job on the embedded engine (started, and its npm packages installed, on first use).
demo: install
	$(BIN)/agefacts demo
	@echo "The agefacts command is in $(VENV)/bin: in a new shell, 'source $(VENV)/bin/activate' puts it on your PATH."

# The picture tests need Graphviz (agefacts show) and Debian's Chromium (to open the page).
system-deps:
	@if command -v dot >/dev/null && command -v chromium >/dev/null; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq graphviz chromium >/dev/null; \
	else \
		echo "the tests need graphviz and chromium: sudo apt-get install graphviz chromium" >&2; exit 1; \
	fi

# Lint and types: a new finding fails the test command, as a failing test does.
lint: install
	$(BIN)/ruff check agefacts tests
	$(BIN)/ruff format --check agefacts tests
	$(BIN)/mypy

# pytest exits 5 when it collected no tests: that is a broken test command, not a pass.
# Two workers, each with an embedded engine of its own (measured: 107 s against 157 s in one
# process on a 2-core machine; three workers were slower, 121 s). Lint and types run beside
# them (mypy takes 6 s on a fresh clone, while the workers start their engines); their output
# follows the tests', and a finding fails the command.
test: install system-deps
	@$(MAKE) --no-print-directory lint > $(VENV)/lint.log 2>&1 & lint=$$!; \
	$(BIN)/python -m pytest -n 2 --dist worksteal $(PYTEST_ARGS); rc=$$?; \
	wait $$lint; lint_rc=$$?; cat $(VENV)/lint.log; \
	if [ $$lint_rc -ne 0 ]; then echo "lint or types failed (above)" >&2; exit 1; fi; \
	if [ $$rc -eq 5 ]; then echo "pytest ran no tests: treating that as a failure" >&2; exit 1; fi; \
	exit $$rc

# The unit tests alone (no engine, no browser), less those marked slow (each runs pytest or
# Python again in a process of its own), with the generated stories cut to 60 examples each: a
# quick check while working; `make test` is what CI runs, everything at full size.
test-fast: install
	@AGEFACTS_FUZZ_EXAMPLES=$${AGEFACTS_FUZZ_EXAMPLES:-60} $(BIN)/python -m pytest -n 2 -m "not slow" tests/unit $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest ran no tests: treating that as a failure" >&2; exit 1; fi; \
	exit $$rc

# The same suite against a PostgreSQL with Apache AGE that you run (see docs/servers.md):
# make test-server AGEFACTS_TEST_DSN="host=... port=... user=... dbname=..."
# In one process: the tests share the server, and some race set-up on agefacts' own tables.
test-server: install system-deps
	@if [ -z "$(AGEFACTS_TEST_DSN)" ]; then echo "set AGEFACTS_TEST_DSN to the server's DSN" >&2; exit 2; fi
	@AGEFACTS_TEST_DSN="$(AGEFACTS_TEST_DSN)" $(BIN)/python -m pytest $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest ran no tests: treating that as a failure" >&2; exit 1; fi; \
	exit $$rc

# The numbers in the README's Performance section (several minutes: the reference path is slow).
bench: install
	$(BIN)/agefacts bench --statements 100000 --reference-cap 5000

clean:
	-$(BIN)/agefacts db stop
	rm -rf $(VENV) build *.egg-info
