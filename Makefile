# The two quickstart commands: `make demo` and `make test`.
# Both create .venv when missing and install vlmcheck with a constraints file
# that pins torch to 2.13.0 (the CPU wheel), so no CUDA packages are pulled.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
STAMP  := $(VENV)/.installed

.PHONY: demo screenshots test test-fast install bench bench-peers clean browser litellm-venv

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip

$(STAMP): $(PY) pyproject.toml constraints.txt
	$(PIP) install --quiet -c constraints.txt -e ".[dev]"
	# timm declares torchvision, whose only wheels here are CUDA builds that
	# fail to load against the CPU torch; transformers then breaks when it sees
	# them. vlmcheck never imports torchvision, so remove it.
	$(PIP) uninstall --quiet --yes torchvision || true
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/vlmcheck demo --out demo-run --no-screenshots

# the demo's report, one screenshot per section (resumes the demo: no model call when it ran before)
screenshots: $(STAMP) browser
	$(VENV)/bin/vlmcheck demo --out demo-run

# The report's browser tests drive a system Chromium through Playwright (no browser download).
# Installing it needs root and the Debian mirror; without it those tests skip, they never fail.
browser:
	@command -v chromium >/dev/null 2>&1 || ( \
	  (DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null 2>&1 \
	   || (apt-get update -q >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null 2>&1)) \
	  || echo "WARNING: could not install chromium; the report's browser tests will be SKIPPED")

# A LiteLLM proxy for tests/test_real_gateway.py, in an environment of its own (its pins clash with the project's;
# no torch): pinned, and optional like the browser: without it those tests skip, saying so.
LITELLM := .venv-litellm

$(LITELLM)/.installed:
	$(PYTHON) -m venv $(LITELLM)
	$(LITELLM)/bin/python -m pip install --quiet --upgrade pip
	$(LITELLM)/bin/python -m pip install --quiet "litellm[proxy]==1.108.7"
	touch $@

litellm-venv:
	@$(MAKE) --no-print-directory $(LITELLM)/.installed \
	  || echo "WARNING: could not install the LiteLLM proxy; tests/test_real_gateway.py will be SKIPPED"


# on every core (pytest-xdist), one test file to a worker: a module's shared fixture (the demo, a served checkpoint)
# is made once, not once per worker; the files in tests/conftest.py's order, the dearest first, so that no heavy
# file is left to run alone at the end
PYTEST := $(PY) -m pytest -q -n auto --dist loadfile --no-loadscope-reorder

test: $(STAMP) browser litellm-venv
	$(PYTEST)

# the developer's loop: every test not marked slow (tests/conftest.py says how a test is marked)
test-fast: $(STAMP)
	$(PYTEST) -m "not slow"

bench: $(STAMP)
	$(PIP) install --quiet --no-deps "imagecorruptions>=1.1.2"
	$(PY) bench/api_throughput.py
	$(PY) bench/corruptions.py
	$(PY) bench/attack.py
	$(PY) bench/input_memory.py
	$(PY) bench/outputs.py
	$(PY) bench/demo_time.py

# lmms-eval and inspect_ai, each in its own venv under bench/ (torch pinned to the CPU wheel; lmms-eval's
# torchvision removed as above: its openai model never uses it), measured against vlmcheck on the same fake
# server and images, interleaved (bench/api_throughput.py --peers). filelock < 4: lmms-eval 0.7.3 imports
# filelock._api, which filelock 4 removed (with 4.x it crashes before any request and still exits 0).
LMMS  := bench/.venv-lmms
INSP  := bench/.venv-inspect

$(LMMS)/.installed: constraints.txt
	$(PYTHON) -m venv $(LMMS)
	$(LMMS)/bin/python -m pip install --quiet --upgrade pip
	$(LMMS)/bin/python -m pip install --quiet -c constraints.txt "lmms-eval==0.7.3" "filelock<4"
	$(LMMS)/bin/python -m pip uninstall --quiet --yes torchvision || true
	touch $@

$(INSP)/.installed:
	$(PYTHON) -m venv $(INSP)
	$(INSP)/bin/python -m pip install --quiet --upgrade pip
	$(INSP)/bin/python -m pip install --quiet "inspect-ai==0.3.285" openai aiohttp
	touch $@

bench-peers: $(STAMP) $(LMMS)/.installed $(INSP)/.installed
	$(PY) bench/api_throughput.py --peers --n 2000 --rounds 3

clean:
	rm -rf $(VENV) $(LMMS) $(INSP) $(LITELLM) demo-run .pytest_cache
