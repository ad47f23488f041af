# The two quickstart commands: `make demo` and `make test`.
# Both create .venv when missing and install vlmcheck with a constraints file
# that pins torch to 2.13.0 (the CPU wheel), so no CUDA packages are pulled.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
STAMP  := $(VENV)/.installed

.PHONY: demo test install bench clean browser

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
	$(VENV)/bin/vlmcheck demo --out demo-run

# The report's browser tests drive a system Chromium through Playwright (no browser download).
# Installing it needs root and the Debian mirror; without it those tests skip, they never fail.
browser:
	@command -v chromium >/dev/null 2>&1 || ( \
	  (DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null 2>&1 \
	   || (apt-get update -q >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null 2>&1)) \
	  || echo "WARNING: could not install chromium; the report's browser tests will be SKIPPED")

test: $(STAMP) browser
	$(PY) -m pytest -q

bench: $(STAMP)
	$(PIP) install --quiet --no-deps "imagecorruptions>=1.1.2"
	$(PY) bench/api_throughput.py
	$(PY) bench/corruptions.py
	$(PY) bench/attack.py
	$(PY) bench/input_memory.py

clean:
	rm -rf $(VENV) demo-run .pytest_cache
