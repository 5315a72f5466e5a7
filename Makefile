# Each target sets up .venv itself (Python 3.11 and the package registries are all it needs):
# see student/venv.mk, shared with the students' copy, for PYTHON= and TORCH_INDEX=.
include student/venv.mk
SUBMISSIONS ?= samples/submitted
OUT ?= grades
JOBS ?=
# pytest-xdist's workers: one more than the cores, since a test waits much of its time (a time limit
# running out, a kernel or a browser starting) and a third worker fills those waits on two cores
WORKERS ?= $(shell echo $$(( $$(nproc) + 1 )))

.PHONY: all book test test-fast release grade check student-copy clean distclean

# $(call apt_install,COMMAND,PACKAGES,WHAT FAILS WITHOUT THEM): `make test` alone, as root, installs
# the Debian packages its tests need, and says so; no other target ever runs apt-get
apt_install = command -v $(1) >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
  echo "make test: installing $(2) with apt-get (running as root; $(1) is missing)" && \
  { apt-get install -y -qq $(2) || { apt-get update -qq && apt-get install -y -qq $(2); }; } >/dev/null 2>&1; } || \
  echo "warning: could not install $(2): $(3)"

all: test

$(STAMP): requirements.txt pyproject.toml
	$(make_venv)
	$(PIP) -r requirements.txt
	touch $(STAMP)

# The whole book, or with CHAPTERS='01-weights 02-global-attention' a term's (book/term.py): those
# chapters only, in _build/term/_build/html, pages already executed by a full build reused.
book: $(STAMP)
ifeq ($(strip $(CHAPTERS)),)
	$(BIN)/jupyter-book build . --warningiserror --nitpick --keep-going
	@echo "Book: _build/html/index.html"
else
	$(BIN)/python book/term.py "$(strip $(CHAPTERS))" > /dev/null
	rm -rf _build/term/_build _build/term/.jupyter_cache
	if [ -d _build/.jupyter_cache ]; then cp -R _build/.jupyter_cache _build/term/; fi
	$(BIN)/jupyter-book build . --warningiserror --nitpick --keep-going --toc _build/term/_toc.yml \
		--config _build/term/_config.yml --path-output _build/term
	@echo "Book of chapters $(strip $(CHAPTERS)): _build/term/_build/html/index.html"
endif

test: $(STAMP)
	@# Debian packages, installed when make test runs as root (CI on a fresh clone): bubblewrap
	@# isolates student code in the autograder's tests (without it they run unisolated or skip);
	@# chromium and its driver run the browser test of the built book (without them it says what is
	@# missing and fails); slurm-wlm runs the guide's Slurm recipe on a one-node cluster (without it
	@# that test is skipped). Other targets never install them: see the README for installing by hand.
	@$(call apt_install,bwrap,bubblewrap,the autograder will run student code without isolation)
	@$(call apt_install,chromedriver,chromium chromium-driver,the browser test of the book cannot run)
	@$(call apt_install,slurmctld,slurm-wlm,the test of the Slurm recipe is skipped)
	$(BIN)/python -m pytest -n $(WORKERS) --dist loadfile --no-loadscope-reorder

# The inner loop: every test but the tiers marked in tests/conftest.py (grading runs, fresh venvs,
# the book, nbgrader's commands); make test runs them all.
test-fast: $(STAMP)
	$(BIN)/python -m pytest -n $(WORKERS) --dist loadfile --no-loadscope-reorder -m "not (slow or venv or book or nbgrader)"

# notebooks/<a> from solutions/<a>, and each assignment recorded in nbgrader's gradebook.db (autograde
# needs it there). nbgrader runs `alembic` from PATH when it makes gradebook.db, hence .venv/bin first.
# Generated into build/release first: a failure leaves notebooks/ as it was. "*": every assignment in one
# nbgrader process (it globs the assignment's name).
release: $(STAMP)
	rm -rf build/release
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/nbgrader generate_assignment "*" --force --log-level=WARN \
	  --CourseDirectory.release_directory="$(CURDIR)/build/release"
	for a in $$(ls solutions); do rm -rf notebooks/$$a && cp -R build/release/$$a notebooks/$$a || exit 1; done
	rm -rf build/release

# exits with the check's status, its summary last (see venv.mk)
ifeq ($(MAKECMDGOALS)$(DRY_RUN),check)
MAKEFLAGS += -q
endif
check:
	$(RECURSE)@test -n "$(NB)" || { echo "usage: make check NB=path/to/notebook.ipynb"; exit 2; }
	$(RECURSE)@$(set_up)
	$(RECURSE)$(BIN)/python -m autograder check "$(NB)"

# What students get (student/make_copy.py): the notebooks, the package without its hidden checks,
# their own README, Makefile and lighter requirements, binder/; no solutions/ and no tests/. A git
# repository with one commit, to push as the students' public repository (repository.url in _config.yml)
student-copy: $(STAMP)
	@test -n "$(DEST)" || { echo "usage: make student-copy DEST=folder [CHAPTERS='01-weights 02-global-attention']"; exit 2; }
	$(BIN)/python student/make_copy.py "$(DEST)" $(if $(strip $(CHAPTERS)),"$(strip $(CHAPTERS))")

grade: $(STAMP)
	$(BIN)/python -m autograder grade $(SUBMISSIONS) --out $(OUT) $(if $(JOBS),-j $(JOBS))

clean:  # keeps .venv: `make distclean` removes it too
	rm -rf _build

distclean: clean
	rm -rf $(VENV) *.egg-info
