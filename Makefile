# The two commands of the README's quick start, and the controller environment they share.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
UV := uv==0.13.9
UV_BUILD := playbooks/roles/framework_envs/files/uv_build_env.py

.PHONY: quickstart test check venv
quickstart: venv  ## set up, then provision + bench + collect + analyze on the local cluster (smoke)
	@# ./quickstart exits with reproduce's own code (3: a cell failed or was disturbed, the
	@# report written); make turns any non-zero code into its own 2
	./quickstart

test: venv  ## unit tests and one real end-to-end smoke run on the local cluster
	$(BIN)/pytest --durations=15 --junitxml=results/tests/junit.xml  # read by `invoke artifact`

check: venv  ## the fast tier, before a change: static checks and unit tests, no cluster
	@# one pytest worker per CPU (pytest-xdist): under half the time of one on 2 cores
	@# (docs/notebook.md, "The first ten minutes")
	$(BIN)/pytest -q -n auto -m "not cluster" --junitxml=results/tests/check.xml

venv: $(VENV)/.installed

$(VENV)/.installed: requirements.txt
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info[:2] < (3, 11))' || \
	  { echo "The controller needs Python 3.11+ (ansible-core 2.19): run make PYTHON=python3.11"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	@# uv (from PyPI) resolves, downloads in parallel and links from its cache: the pinned
	@# requirements in seconds where pip took over a minute (docs/notebook.md). Compiled once
	@# here, as pip does: where PYTHONDONTWRITEBYTECODE is set, every invoke and Ansible
	@# process would otherwise compile what it imports (docs/notebook.md)
	@# uv does not read pip's configuration (a certificate, a wheel cache, an index): the same
	@# script that builds the nodes' envs hands it over
	$(BIN)/pip install --quiet --disable-pip-version-check $(UV)
	$(BIN)/python $(UV_BUILD) --into $(BIN)/python --compile -- -r requirements.txt
	touch $@
