# The two commands of the README's quick start, and the controller environment they share.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: quickstart test check venv
quickstart: venv  ## set up, then provision + bench + collect + analyze on the local cluster (smoke)
	@# exit 3 (a cell disturbed or failed: said above, the report written) ends the quick start
	@# too; any other non-zero code fails it. `invoke reproduce` itself keeps the code.
	$(BIN)/invoke reproduce || [ $$? -eq 3 ]

test: venv  ## unit tests and one real end-to-end smoke run on the local cluster
	$(BIN)/pytest --durations=15 --junitxml=results/tests/junit.xml  # read by `invoke artifact`

check: venv  ## the fast tier, before a change: static checks and unit tests, no cluster (~1.5 min)
	$(BIN)/pytest -q -m "not cluster"

venv: $(VENV)/.installed

$(VENV)/.installed: requirements.txt
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info[:2] < (3, 11))' || \
	  { echo "The controller needs Python 3.11+ (ansible-core 2.19): run make PYTHON=python3.11"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -r requirements.txt
	touch $@
