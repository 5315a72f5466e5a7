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

# `make check` exits with the check's own status (0 ready, 1 something to fix, 2 usage error) and
# ends on the check's summary. GNU make exits 2 whenever a command fails, after a line of its own
# ("make: *** [Makefile:..: check] Error 1"), except in question mode (-q), where the status 1 of a
# recursive command (one marked `+`) becomes make's own status, quietly. So a Makefile's check
# target is run in question mode (`MAKEFLAGS += -q` when it is make's only goal), its commands are
# marked `+`, and $(set_up), its first command, makes .venv up to date in a make of its own,
# outside question mode, as the $(STAMP) rule does for any other target.
# `make -n check` prints the check's commands and runs none: in a dry run (-n) the check target
# is not run in question mode and its commands are not marked `+` ($(RECURSE) is empty), so make
# neither sets up .venv nor runs the check.
DRY_RUN := $(findstring n,$(firstword -$(MAKEFLAGS)))
RECURSE := $(if $(DRY_RUN),,+)
make_again = MAKEFLAGS= $(MAKE) --no-print-directory -f $(firstword $(MAKEFILE_LIST)) \
  PYTHON="$(PYTHON)" TORCH_INDEX="$(TORCH_INDEX)"
set_up = $(make_again) -q $(STAMP) 2>/dev/null || $(make_again) $(STAMP)
