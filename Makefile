# Two entry points for a fresh Debian machine with Python 3.11: `make run` and `make test`
# (`make test-fast`: the in-process tests only, a couple of minutes, with none of the
# Debian packages make test installs).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
# Debian's packages, installed when missing: wait (up to 10 min) for a dpkg lock another
# apt run holds (unattended upgrades, a second make) instead of failing at once.
APT := DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600

# The suite runs in five pytest-xdist workers, a file per worker at a time, the longest
# files first (tests/conftest.py LONGEST_FIRST): a test spends much of its time waiting on
# broker processes, JVMs and sockets, so on two cores three workers kept the CPUs busy 78%
# of the run (434 s), four 87% (342 s), five 94% (312 s; 2026-11-30, docs/developers/
# tests.md). PYTEST_ARGS= runs it in one process.
PYTEST_ARGS ?= -n 5 --dist loadfile --no-loadscope-reorder --durations=30

# The project's own bytecode, written once: pip compiles what it installs, not an editable
# checkout, and where PYTHONDONTWRITEBYTECODE is set (as on CI) every broker, manage.py and
# worker process would compile ~250 modules again (0.4 s of CPU each; a suite starts
# hundreds). A source changed later is compiled in memory until the next install.
BYTECODE = $(BIN)/python -m compileall -q -j 0 broker portal openmq_client tests bench manage.py

# pytest rewrites the asserts of every test module it imports and keeps the result in
# __pycache__ -- unless PYTHONDONTWRITEBYTECODE is set (as on CI): then each xdist worker
# and each pytest a test starts rewrites all ~200 modules again, ~9 s of CPU a process.
# One collection with bytecode on writes those files once (they are read even where
# writing is off); a failure here is pytest's to report in the run that follows.
TEST_BYTECODE = env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m pytest --collect-only -q -p no:cacheprovider >/dev/null 2>&1 || true

.PHONY: run test test-fast install install-dev install-dev-python lint lock clean

$(BIN)/python:
	@# Debian ships venv separately; install it when this is a fresh machine.
	$(PY) -m venv $(VENV) || { rm -rf $(VENV); $(APT) update -q && $(APT) install -y -q python3-venv && $(PY) -m venv $(VENV); }
	$(BIN)/pip install -q --upgrade pip

install: $(BIN)/python
	$(BIN)/pip install -q -r requirements.lock
	$(BIN)/pip install -q --no-deps -e .
	$(BYTECODE)
	@# `manage.py up` (make run) starts a private redis-server (loopback, free port, no
	@# persistence) when REDIS_URL is unset; the package's own service is unused.
	test -x /usr/bin/redis-server || { $(APT) update -q && $(APT) install -y -q redis-server; }
	@# Celery beat runs the hourly metrics rollup on PySpark, which needs a Java runtime.
	command -v java >/dev/null || { $(APT) update -q && $(APT) install -y -q openjdk-17-jre-headless; }

# install-dev-python: the Python side of install-dev, all make test-fast needs (the fast
# tier starts no PostgreSQL, slapd, redis, Chromium or JVM).
install-dev-python: $(BIN)/python
	$(BIN)/pip install -q -r requirements-dev.lock
	$(BIN)/pip install -q --no-deps -e .
	$(BYTECODE)

install-dev: install-dev-python
	@# The database-store tests start a PostgreSQL server of their own (tests/pg.py: private
	@# data dir, port and socket) from Debian's binaries; the package's own cluster is unused.
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || { $(APT) update -q && $(APT) install -y -q postgresql; }
	@# The LDAP user-repository tests run their own slapd (tests/ldap.py: private config, data
	@# and loopback port); the package's own daemon is unused.
	test -x /usr/sbin/slapd || { $(APT) update -q && $(APT) install -y -q slapd ldap-utils; }
	@# The live-events tests run their own redis-server (tests/redis.py: loopback, free port,
	@# private dir, no persistence); the package's own service is unused.
	test -x /usr/bin/redis-server || { $(APT) update -q && $(APT) install -y -q redis-server; }
	@# The portal tests drive Debian's headless Chromium through Playwright (no browser
	@# download: tests/portal_server.py launches /usr/bin/chromium).
	test -x /usr/bin/chromium || { $(APT) update -q && $(APT) install -y -q chromium; }
	@# The interoperability tests (tests/interop) compile C probes against the stock OpenMQ C
	@# client (third_party/openmq/realclient/c, built against Debian's NSPR and NSS) and, once the stock
	@# Java client jars are there, Java probes with javac.
	command -v gcc >/dev/null || { $(APT) update -q && $(APT) install -y -q gcc libc6-dev; }
	{ ls /usr/lib/*/libnspr4.so >/dev/null 2>&1 && ls /usr/lib/*/libnss3.so >/dev/null 2>&1; } || { $(APT) update -q && $(APT) install -y -q libnspr4 libnss3; }
	command -v javac >/dev/null || { $(APT) update -q && $(APT) install -y -q openjdk-17-jdk-headless; }
	@# The UMS XML test's Java program reads and writes SOAP messages with SAAJ, which the
	@# JDK has not had since 11: Debian's reference implementation.
	test -f /usr/share/java/saaj-impl.jar || { $(APT) update -q && $(APT) install -y -q libsaaj-ri-java; }

# The broker, the portal (http://127.0.0.1:8000/) and redis, under one supervisor
# (manage.py up: Ctrl-C stops them all); ARGS go to it, e.g. ARGS="--portal-port 8080 -port 7677".
run: install
	$(BIN)/python manage.py up $(ARGS)

# mypy checks the packages [tool.mypy] in pyproject.toml names (its cache in .mypy_cache).
test: install-dev
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(TEST_BYTECODE)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# The fast tier: the tests marked `fast` (pytest -m fast), in process only -- codecs, the
# connection engine, the router and its parts, cluster links, selectors, the file store --
# with no broker, PostgreSQL, slapd, redis, Chromium or JVM; tests/fasttier.py fails a
# marked test that starts a process or connects outside the test process.
FAST_PYTEST_ARGS ?= -n 2
test-fast: install-dev-python
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(TEST_BYTECODE)
	$(BIN)/python -m pytest -m fast $(FAST_PYTEST_ARGS)

lint: install-dev-python
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

lock: $(BIN)/python
	$(BIN)/pip install -q pip-tools
	$(BIN)/pip-compile -q --strip-extras --generate-hashes -o requirements.lock pyproject.toml
	$(BIN)/pip-compile -q --strip-extras --generate-hashes --extra dev -o requirements-dev.lock pyproject.toml

clean:
	rm -rf $(VENV) var/test-*
