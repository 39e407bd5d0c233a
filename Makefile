PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin

.PHONY: install test bench lint demo clean

install: $(BIN)/dutchbook

$(BIN)/dutchbook: pyproject.toml
	@command -v $(PY) >/dev/null 2>&1 || { echo "need $(PY) (Python >= 3.11)"; exit 1; }
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test,figures]'
	@touch $@

test: install
	$(BIN)/pytest -q

bench: install
	$(BIN)/python -m bench

lint: install
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/lint-imports

demo: install
	$(BIN)/dutchbook run runs/specs/quickstart.toml

clean:
	rm -rf $(VENV) out .pytest_cache .mypy_cache .ruff_cache
