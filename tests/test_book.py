"""The book builds, serves its maths locally, draws its figures, offers the student
notebooks for download, and publishes no solution or hidden-test code.

The book is built once per test run (the `build` fixture of conftest.py, see book_build.py),
into the repository's `_build/`, with the same command as `make book`; test_browser.py reads
the same build.
"""
import filecmp
import html
import importlib.metadata
import json
import os
import re
import subprocess
from pathlib import Path

import nbformat
import pytest
import yaml

from book_build import BUILD, HTML, LOCK, ROOT, STAMP, chapter_pages, student_notebooks, toc_files

MARKERS = ["### BEGIN SOLUTION", "### END SOLUTION", "### BEGIN HIDDEN TESTS",
           "### END HIDDEN TESTS", "BEGIN HIDDEN TESTS", "BEGIN SOLUTION"]
MIN_LINE = 25                          # shorter lines are too generic to be evidence

CDN = re.compile(r"(cdn\.jsdelivr\.net|cdnjs\.cloudflare\.com|jsdelivr|"
                 r"https?://[^\"'\s>]*mathjax)", re.IGNORECASE)


def vendored(path):
    """Whether a built file is MathJax's, copied byte for byte from the sphinx-mathjax-offline package
    (24 MB of a third party's JavaScript, public by design: searching it for the course's lines took
    most of a minute). A file the build changed there is searched like any other."""
    relative = path.relative_to(HTML / "_static" / "mathjax") if path.is_relative_to(HTML / "_static" / "mathjax") else None
    if relative is None:
        return False
    shipped = Path(str(importlib.metadata.distribution("sphinx-mathjax-offline").locate_file(
        "sphinx-mathjax-offline/static/mathjax"))) / relative
    return shipped.is_file() and filecmp.cmp(path, shipped, shallow=False)


def built_files():
    for path in sorted(BUILD.rglob("*")):
        if path in (STAMP, LOCK) or not path.is_file() or vendored(path):
            continue
        yield path


def searchable_texts(path):
    """The file's bytes, and for an HTML page also its text without tags and entities."""
    data = path.read_bytes()
    texts = [data]
    if path.suffix == ".html":
        text = data.decode("utf-8", errors="replace")
        texts.append(html.unescape(re.sub(r"<[^>]+>", "", text)).encode("utf-8"))
    return texts


def cell_lines_between(source, begin, end):
    lines, inside = [], False
    for line in source.splitlines():
        if begin in line:
            inside = True
        elif end in line:
            inside = False
        elif inside:
            lines.append(line)
    return lines


def secret_lines():
    """Non-trivial lines of the reference solutions and hidden tests in solutions/."""
    secrets = {}
    for notebook in sorted(ROOT.glob("solutions/*/*.ipynb")):
        nb = nbformat.read(notebook, as_version=4)
        for cell in nb.cells:
            meta = cell.metadata.get("nbgrader", {})
            found = []
            if meta.get("solution"):
                found += cell_lines_between(cell.source, "### BEGIN SOLUTION",
                                            "### END SOLUTION")
            found += cell_lines_between(cell.source, "### BEGIN HIDDEN TESTS",
                                        "### END HIDDEN TESTS")
            for line in found:
                line = line.strip()
                if len(line) >= MIN_LINE and not line.startswith("#"):
                    secrets.setdefault(line, notebook.relative_to(ROOT))
    return secrets


def encodings(line):
    """How a line of code can appear in a built file: as is, in JSON, in HTML."""
    forms = {line, json.dumps(line)[1:-1], html.escape(line), html.escape(line, quote=False)}
    return [form.encode("utf-8") for form in forms]


def test_build_succeeds(build):
    assert build["returncode"] == 0, "jupyter-book build failed:\n" + build["log"]
    assert (HTML / "index.html").is_file()


def test_every_page_is_built(build):
    for name in toc_files():
        assert (HTML / f"{name}.html").is_file(), f"{name} was not built"


def test_mathjax_is_served_locally(build):
    assert (HTML / "_static" / "mathjax" / "tex-chtml.js").is_file()
    pages = sorted(HTML.rglob("*.html"))
    assert pages
    for page in pages:
        text = page.read_text(encoding="utf-8", errors="replace")
        match = CDN.search(text)
        assert match is None, f"{page.relative_to(HTML)} references a CDN: {match.group(0)}"
    for name in chapter_pages():
        text = (HTML / f"{name}.html").read_text(encoding="utf-8")
        assert re.search(r'<script[^>]+src="[./]*_static/mathjax/tex-chtml\.js(\?[^"]*)?"', text), \
            f"{name}.html does not load the local MathJax"


def test_chapter_pages_have_figures(build):
    assert chapter_pages(), "the TOC lists no chapter page book/NN-name"
    for name in chapter_pages():
        text = (HTML / f"{name}.html").read_text(encoding="utf-8")
        images = re.findall(r'<img[^>]+src="([^"]+\.png|data:image/png[^"]*)"', text)
        assert len(images) >= 2, f"{name}.html has {len(images)} figure(s), expected >= 2"
        for src in images:
            if not src.startswith("data:"):
                assert (HTML / name).parent.joinpath(src).resolve().is_file(), src


def test_student_notebooks_are_downloadable(build):
    notebooks = student_notebooks()
    assert notebooks, "the TOC lists no student notebook"
    for name in notebooks:
        page = HTML / f"{name}.html"
        assert page.is_file(), f"no page for {name}"
        download = HTML / "_sources" / f"{name}.ipynb"
        assert download.is_file(), f"{name}.ipynb is not downloadable"
        assert download.read_bytes() == (ROOT / f"{name}.ipynb").read_bytes()
        link = f'_sources/{name}.ipynb"'
        assert link in page.read_text(encoding="utf-8"), f"{page} has no download link"


def test_no_solution_markers_in_build(build):
    needles = [m.encode("utf-8") for m in MARKERS]
    leaks = []
    for path in built_files():
        for text in searchable_texts(path):
            leaks += [f"{path.relative_to(BUILD)}: {n.decode()}" for n in needles if n in text]
    assert not leaks, "nbgrader markers in the build:\n" + "\n".join(sorted(set(leaks)))


def test_no_solution_code_in_build(build):
    secrets = secret_lines()
    if list(ROOT.glob("solutions/*/*.ipynb")):
        assert secrets, "solutions/ has notebooks but no solution lines were found in them"
    needles = {line: encodings(line) for line in secrets}
    leaks = []
    for path in built_files():
        texts = searchable_texts(path)
        for line, forms in needles.items():
            if any(form in text for form in forms for text in texts):
                leaks.append(f"{path.relative_to(BUILD)}: {line!r} (from {secrets[line]})")
    assert not leaks, "solution or hidden-test code in the build:\n" + "\n".join(leaks)


def test_every_cell_ran_in_under_half_its_timeout(build):
    """No page cell near its timeout (issue 23): each cell this build executed, beside the rest of
    the suite, ran in under half of the cell execution timeout (_config.yml). The pages' totals are
    in the message. benchmarks/book_on_busy_cores.py measures the same beside two busy-looping
    processes."""
    timeout = yaml.safe_load((ROOT / "_config.yml").read_text())["execute"]["timeout"]
    if not build["page_seconds"]:
        pytest.skip("every page came from the execution cache: no page ran in this build")
    timed = build["cell_seconds"]
    assert set(timed) == set(build["page_seconds"]), \
        f"the cells of these pages were not timed: {set(build['page_seconds']) - set(timed)}; timed: {set(timed)}"
    slow = [f"{page}, cell {i + 1}: {seconds:.0f} s ({line})" for page, cells in timed.items()
            for i, (seconds, line) in enumerate(cells) if seconds >= timeout / 2]
    assert not slow, (f"cells that ran for half the {timeout} s cell timeout or more: {slow}; the pages' totals: "
                      f"{build['page_seconds']}")


def test_the_cell_bar_catches_a_slow_cell_and_an_untimed_page():
    page = {"book/x": 200.0}
    with pytest.raises(AssertionError, match=r"book/x, cell 2: 160 s \(train\(\)\)"):
        test_every_cell_ran_in_under_half_its_timeout({"page_seconds": page,
                                                       "cell_seconds": {"book/x": [(40.0, "x = 1"), (160.0, "train()")]}})
    with pytest.raises(AssertionError, match="not timed"):
        test_every_cell_ran_in_under_half_its_timeout({"page_seconds": page, "cell_seconds": {}})
    test_every_cell_ran_in_under_half_its_timeout({"page_seconds": page, "cell_seconds": {"book/x": [(149.0, "a")]}})


# ---- issue 29: the instructors' repository is private; the book and the students' repository
# are public. Neither holds a line of solutions/, tests/mutants/ or autograder/checks/, and the
# book links to the students' repository (repository.url), never to the private one.

PRIVATE_MIN_LINE = 30


def public_text():
    """Everything the course publishes by design, one line after another: the released notebooks'
    cells, the reading pages, the autograder package the students' copy ships (all of it but
    checks/). A private line found in it (a generic `if isinstance(value, np.ndarray):`, a line
    of the reading with a comment after it) is no evidence of a leak."""
    texts = [cell.source for path in sorted(ROOT.glob("notebooks/*/*.ipynb"))
             for cell in nbformat.read(path, as_version=4).cells]
    sources = [*ROOT.glob("book/**/*.md"), *(p for p in ROOT.glob("autograder/**/*.py")
                                            if p.relative_to(ROOT / "autograder").parts[0] != "checks")]
    texts += [path.read_text(encoding="utf-8") for path in sorted(sources)]
    return "\n".join(texts)


def private_lines():
    """{line: where it comes from}: the solution cells' lines between the solution markers, every
    line of tests/mutants/ and autograder/checks/, at least PRIVATE_MIN_LINE long and published
    nowhere by design (public_text)."""
    public, found = public_text(), {}
    for path in sorted(ROOT.glob("solutions/*/*.ipynb")):
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.metadata.get("nbgrader", {}).get("solution"):
                for line in cell_lines_between(cell.source, "### BEGIN SOLUTION", "### END SOLUTION"):
                    found.setdefault(line.strip(), path.relative_to(ROOT))
    for path in sorted([*ROOT.glob("tests/mutants/*.py"), *ROOT.glob("autograder/checks/*.py")]):
        for line in path.read_text(encoding="utf-8").splitlines():
            found.setdefault(line.strip(), path.relative_to(ROOT))
    return {line: where for line, where in found.items() if len(line) >= PRIVATE_MIN_LINE and line not in public}


def leaks_of(lines, files, root):
    """`file: line (from where)` for every private line found in one of the files."""
    needles = {line: encodings(line) for line in lines}
    leaks = []
    for path in files:
        texts = searchable_texts(path)
        leaks += [f"{path.relative_to(root)}: {line!r} (from {lines[line]})"
                  for line, forms in needles.items() if any(form in text for form in forms for text in texts)]
    return leaks


def private_repositories():
    """The addresses of the instructors' repository, as `github.com/owner/name`: this working
    tree's remotes, and the repository a GitHub workflow runs in (GITHUB_REPOSITORY)."""
    found = set()
    remotes = subprocess.run(["git", "remote", "-v"], cwd=ROOT, capture_output=True, text=True).stdout
    for url in re.findall(r"\s(\S+)\s\((?:fetch|push)\)", remotes):
        match = re.search(r"([\w.-]+\.[a-z]+)[:/]+([\w.-]+/[\w.-]+?)(?:\.git)?/?$", url)
        if match:
            found.add(f"{match[1]}/{match[2]}".lower())
    if os.environ.get("GITHUB_REPOSITORY"):
        found.add(f"github.com/{os.environ['GITHUB_REPOSITORY']}".lower())
    return found


def test_no_private_line_and_no_link_to_the_private_repository_in_build(build):
    lines = private_lines()
    assert len(lines) > 100, "no distinctive lines found in solutions/, tests/mutants/, autograder/checks/"
    html_files = [p for p in built_files() if p.suffix in (".html", ".ipynb", ".txt", ".js", ".md", ".json")]
    leaks = leaks_of(lines, html_files, BUILD)
    assert not leaks, "lines of the private repository in the build:\n" + "\n".join(leaks)
    # the launch buttons point at repository.url, the students' repository, and nothing links to
    # the instructors' own (where this tree has a remote, or the workflow runs)
    students = (yaml.safe_load((ROOT / "_config.yml").read_text()).get("repository") or {}).get("url") or ""
    private = private_repositories()
    assert not any(students.lower().rstrip("/").endswith(p) for p in private), \
        f"repository.url is the instructors' repository ({students}): set it to the students' repository"
    for page in HTML.rglob("*.html"):
        text = page.read_text(encoding="utf-8", errors="replace").lower()
        for repo in private:
            assert repo not in text, f"{page.relative_to(HTML)} links to the private repository {repo}"
