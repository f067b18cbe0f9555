# The README's commands. Each target installs what it needs first, so both work on a fresh clone.
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin

.PHONY: install demo test bench clean

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[test]'
	touch $@

install: $(BIN)/.installed

# The main job on the embedded engine (started, and its npm packages installed, on first use).
demo: install
	$(BIN)/agefacts demo

# pytest exits 5 when it collected no tests: that is a broken test command, not a pass.
test: install
	@$(BIN)/python -m pytest $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest ran no tests: treating that as a failure" >&2; exit 1; fi; \
	exit $$rc

clean:
	-$(BIN)/agefacts db stop
	rm -rf $(VENV) build *.egg-info
