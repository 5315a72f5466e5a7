# Each target sets up .venv itself (Python 3.11 and the package registries are all it needs).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
SUBMISSIONS ?= samples/submitted
OUT ?= grades
JOBS ?=

.PHONY: all book test release grade clean

all: test

$(STAMP): requirements.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --disable-pip-version-check -q -r requirements.txt
	@# bubblewrap isolates student code in the autograder; without it grading still works, unisolated
	@command -v bwrap >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
	  { apt-get install -y -qq bubblewrap || { apt-get update -qq && apt-get install -y -qq bubblewrap; }; } >/dev/null 2>&1; } || \
	  echo "warning: could not install bubblewrap: the autograder will run student code without isolation"
	touch $(STAMP)

book: $(STAMP)
	$(BIN)/jupyter-book build . --warningiserror --nitpick --keep-going
	@echo "Book: _build/html/index.html"

test: $(STAMP)
	$(BIN)/python -m pytest -n auto --dist loadfile

release: $(STAMP)
	for a in $$(ls solutions); do $(BIN)/nbgrader generate_assignment $$a --no-db --force --log-level=WARN || exit 1; done

grade: $(STAMP)
	$(BIN)/python -m autograder grade $(SUBMISSIONS) --out $(OUT) $(if $(JOBS),-j $(JOBS))

clean:
	rm -rf _build
