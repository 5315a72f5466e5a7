# The set-up every target needs: .venv, made by Python 3.11 (the version the pinned packages are
# tested with), holding requirements.txt. Included by the course's Makefile and, as venv.mk, by
# the students' copy. Variables:
#   PYTHON=/path/to/python3.11   the Python that makes .venv (default: python3.11 if on PATH, else python3)
#   TORCH_INDEX=https://download.pytorch.org/whl/cpu   install torch from there first: PyTorch's
#                                CPU-only build (on Linux a plain install is the CUDA build, several GB)
PYTHON_VERSION := 3.11
PYTHON ?= $(shell command -v python$(PYTHON_VERSION) 2>/dev/null || echo python3)
TORCH_INDEX ?=
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PIP := $(BIN)/pip install --disable-pip-version-check -q

# A .venv made by another Python (its pyvenv.cfg says which) is made again: the install rule runs
# whatever the stamp's date. (This file defines no target: the including Makefile's first is the default.)
ifneq ($(wildcard $(VENV)/pyvenv.cfg),)
ifneq ($(shell sed -n 's/^version[_a-z]* *= *\([0-9]*\.[0-9]*\).*/\1/p' $(VENV)/pyvenv.cfg),$(PYTHON_VERSION))
.PHONY: $(STAMP)
endif
endif

# $(make_venv): the first lines of the rule that installs into .venv. It keeps a .venv of Python
# 3.11 that runs, replaces any other, and refuses to make one with another Python than 3.11.
define make_venv
	@made=$$(sed -n 's/^version[_a-z]* *= *\([0-9]*\.[0-9]*\).*/\1/p' $(VENV)/pyvenv.cfg 2>/dev/null); \
	if [ -e $(VENV) ] && [ "$$made" != $(PYTHON_VERSION) ]; then \
	  echo "$(VENV) was made by Python $${made:-of an unknown version}, not $(PYTHON_VERSION): making it again"; rm -rf $(VENV); \
	elif [ -e $(VENV) ] && ! $(BIN)/python -c '' 2>/dev/null; then \
	  echo "the Python of $(VENV) no longer runs: making it again"; rm -rf $(VENV); \
	fi; \
	if [ ! -e $(VENV) ]; then \
	  found=$$($(PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null); \
	  if [ "$$found" != $(PYTHON_VERSION) ]; then \
	    what=$${found:+is Python $$found}; \
	    echo "error: the course needs Python $(PYTHON_VERSION), and $(PYTHON) $${what:-was not found}." >&2; \
	    echo "Install Python $(PYTHON_VERSION) (from https://www.python.org/downloads/; on Debian or Ubuntu" \
	         "'sudo apt install python$(PYTHON_VERSION) python$(PYTHON_VERSION)-venv'; on macOS 'brew install python@$(PYTHON_VERSION)';" \
	         "or 'uv python install $(PYTHON_VERSION)'), then run make again, with PYTHON=/path/to/python$(PYTHON_VERSION)" \
	         "if python$(PYTHON_VERSION) is not on your PATH." >&2; \
	    exit 1; \
	  fi; \
	  echo "$(PYTHON) -m venv $(VENV)"; \
	  $(PYTHON) -m venv $(VENV) || { rm -rf $(VENV); exit 1; }; \
	fi
	$(if $(TORCH_INDEX),$(PIP) $(shell grep -m1 '^torch==' requirements.txt) --index-url $(TORCH_INDEX))
endef
