# Two entry points for a fresh Debian machine with Python 3.11: `make run` and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: run test install install-dev lint lock clean

$(BIN)/python:
	@# Debian ships venv separately; install it when this is a fresh machine.
	$(PY) -m venv $(VENV) || { rm -rf $(VENV); apt-get update -q && apt-get install -y -q python3-venv && $(PY) -m venv $(VENV); }
	$(BIN)/pip install -q --upgrade pip

install: $(BIN)/python
	$(BIN)/pip install -q -r requirements.lock
	$(BIN)/pip install -q --no-deps -e .

install-dev: $(BIN)/python
	$(BIN)/pip install -q -r requirements-dev.lock
	$(BIN)/pip install -q --no-deps -e .
	@# The database-store tests start a PostgreSQL server of their own (tests/pg.py: private
	@# data dir, port and socket) from Debian's binaries; the package's own cluster is unused.
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql; }
	@# The LDAP user-repository tests run their own slapd (tests/ldap.py: private config, data
	@# and loopback port); the package's own daemon is unused.
	test -x /usr/sbin/slapd || { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q slapd ldap-utils; }

run: install
	$(BIN)/python manage.py migrate --noinput
	$(BIN)/python manage.py runbroker -tty $(ARGS)

test: install-dev
	$(BIN)/ruff check .
	$(BIN)/python -m pytest $(PYTEST_ARGS)

lint: install-dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

lock: $(BIN)/python
	$(BIN)/pip install -q pip-tools
	$(BIN)/pip-compile -q --strip-extras --generate-hashes -o requirements.lock pyproject.toml
	$(BIN)/pip-compile -q --strip-extras --generate-hashes --extra dev -o requirements-dev.lock pyproject.toml

clean:
	rm -rf $(VENV) var/test-*
