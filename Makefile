# The two commands a newcomer needs: `make train` and `make test`. Both set up .venv themselves.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# e.g. PIP_EXTRA="--extra-index-url https://download.pytorch.org/whl/cpu" for a CPU-only torch
PIP_EXTRA ?=
PYTEST := $(BIN)/python -m pytest
CHECKOV_VENV := .venv-checkov
CHECKOV_VERSION := 3.3.30
# Azure Blob emulator for the checkpoint storage tests; 3.36+ needs node >= 21.
AZURITE_VERSION := 3.35.0
AZURITE_DIR := $(VENV)/azurite

.PHONY: train check cli status doctor test test-infra test-trainer check-tables bench bench-data prepare-sample settings-docs clean

# Stamps re-run an install only when its requirements change, so the second run is quick.
# Each also installs this project's console script, .venv/bin/torchrec-cloud (pyproject.toml;
# editable and without dependencies: the requirements files pin those).
INSTALL_SCRIPT := $(BIN)/pip install -q --disable-pip-version-check --no-deps -e .
# `make check` installs only what checking needs (requirements-check.txt: pydantic, PyYAML).
$(VENV)/.check-installed: requirements-check.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --disable-pip-version-check -r requirements-check.txt
	$(INSTALL_SCRIPT)
	touch $@

# `make status` / `make doctor` install only what the commands on a stack need
# (requirements-cli.txt: the checking set, the bucket's libraries, boto3, matplotlib).
$(VENV)/.cli-installed: requirements-cli.txt requirements-check.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --disable-pip-version-check -r requirements-cli.txt
	$(INSTALL_SCRIPT)
	touch $@

$(VENV)/.infra-installed: requirements.txt requirements-check.txt requirements-cli.txt requirements-dev.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --disable-pip-version-check -r requirements-dev.txt
	$(INSTALL_SCRIPT)
	touch $@

$(VENV)/.trainer-installed: $(VENV)/.infra-installed trainer/requirements-cpu.txt trainer/requirements-torchrec.txt
	$(BIN)/pip install -q --disable-pip-version-check $(PIP_EXTRA) -r trainer/requirements-cpu.txt
	$(BIN)/pip install -q --disable-pip-version-check --no-deps -r trainer/requirements-torchrec.txt
	touch $@

# checkov pins packaging<24, which pulumi cannot live with: it gets its own environment.
$(CHECKOV_VENV)/.installed: Makefile
	test -x $(CHECKOV_VENV)/bin/python || $(PYTHON) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/pip install -q --disable-pip-version-check checkov==$(CHECKOV_VERSION)
	touch $@

# Azurite from npm into the venv folder (ignored by git, removed by `make clean`).
$(AZURITE_DIR)/.installed: Makefile
	mkdir -p $(AZURITE_DIR)
	npm install --prefix $(AZURITE_DIR) --no-audit --no-fund --loglevel=error azurite@$(AZURITE_VERSION)
	touch $@

## Train briefly on this machine with synthetic data (CPU: 2 processes on gloo; GPU: every GPU).
train: $(VENV)/.trainer-installed
	$(BIN)/python -m trainer.local_run $(ARGS)

## Check a stack file before paying: every setting, the machines, the hourly and per-run cost.
## No Pulumi CLI, backend or credentials needed. STACK=aws|azure|gcp.
STACK ?=
check: $(VENV)/.check-installed
	@test -n "$(STACK)" || { echo "usage: make check STACK=aws|azure|gcp"; exit 2; }
	@$(BIN)/python -m torchrec_cloud check --stack $(STACK)

## The command line, .venv/bin/torchrec-cloud, with what its verbs on a deployed stack need
## (requirements-cli.txt); every verb and an example: docs/commands.md.
cli: $(VENV)/.cli-installed
	@$(BIN)/torchrec-cloud --help

## A deployed stack from this machine: nodes, the gang and why it waits, progress, checkpoints,
## spend. Needs the stack's outputs (Pulumi CLI, logged in) and kubectl. STACK=aws|azure|gcp.
status: $(VENV)/.cli-installed
	@test -n "$(STACK)" || { echo "usage: make status STACK=aws|azure|gcp"; exit 2; }
	@$(BIN)/python -m torchrec_cloud status --stack $(STACK)

## Before `pulumi up`: the tools, your sign-in, your address and the quotas the pools need.
doctor: $(VENV)/.cli-installed
	@test -n "$(STACK)" || { echo "usage: make doctor STACK=aws|azure|gcp"; exit 2; }
	@$(BIN)/python -m torchrec_cloud doctor --stack $(STACK)

## Every test: settings, catalog, the three stacks under mocks, workloads, trainer.
# (the three environments install side by side: separate folders)
test:
	$(MAKE) -j3 $(VENV)/.trainer-installed $(CHECKOV_VENV)/.installed $(AZURITE_DIR)/.installed
	$(PYTEST) tests -q -n 3 --dist loadfile --durations=12

test-infra: $(VENV)/.infra-installed $(CHECKOV_VENV)/.installed
	$(PYTEST) tests -q --ignore=tests/trainer

test-trainer: $(VENV)/.trainer-installed $(AZURITE_DIR)/.installed
	$(PYTEST) tests/trainer -q

## Warn (exit 0) when the add-on table or the Kubernetes calendars were last checked more than
## six months ago. Not part of `make test`: for a scheduled job.
check-tables: $(VENV)/.infra-installed
	$(BIN)/python -m infra.table_age

## Global samples/s of our trainer and TorchRec's reference DLRM, side by side; then checkpoint
## save time, training stall (sync vs async), throughput, MLPerf projection and resume time.
bench: $(VENV)/.trainer-installed
	$(BIN)/python bench/train_throughput.py
	$(BIN)/python bench/checkpoint_bench.py

## Data delivered to a training loop per format and batch (target 150k samples/s per rank, under
## 2% of the step waiting), then the training metrics' cost against the training step, then the
## dataset preparation's rows/s and memory per worker and pass.
bench-data: $(VENV)/.trainer-installed
	$(BIN)/python bench/data_bench.py
	$(BIN)/python bench/metric_bench.py
	$(BIN)/python bench/prepare_bench.py

## A small sample in Criteo's public TSV format (4 days of 5,000 rows) through
## `python -m trainer.prepare` into out/prepare-sample/data, then a brief training run on it.
prepare-sample: $(VENV)/.trainer-installed
	rm -rf out/prepare-sample
	$(BIN)/python -m trainer.prepare.sample out/prepare-sample

## Regenerate the generated tables in docs/ (settings, spot notices, fabric floors) from the code.
settings-docs: $(VENV)/.infra-installed
	$(BIN)/python -m infra.settings.docs --write docs

clean:
	rm -rf $(VENV) $(CHECKOV_VENV) .venv-pulumi .pytest_cache torchrec_cloud.egg-info
