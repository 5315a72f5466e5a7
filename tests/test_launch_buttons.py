"""Launch buttons come from one setting: `repository.url` in _config.yml.

A tiny Jupyter Book (a reading page written as a MyST text notebook, and a student notebook
at notebooks/<a>/<a>.ipynb, as in the course) is built in a temporary folder with the
repository's own `launch_buttons`, `repository` and `html_context` settings and its
`_static/`, nothing executed; each build takes a few seconds.

- With the url set, the student notebook's page launches that notebook on Binder and Colab,
  and the reading page has no launch links in its HTML (they would open a .md file the students'
  repository lacks): book/_ext/launch_links.py removes them.
- With the url empty, as shipped, the book builds without a warning and links to no launch
  service at all.
- The url is the students' repository (make student-copy); the Pages workflow, which runs in the
  instructors' private repository, refuses to build a book whose url is that repository.
"""
import copy
import html
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import yaml

ROOT = Path(__file__).resolve().parents[1]
TEST_URL = "https://github.com/example/attention-gradually"
NAME = "01-demo"
SERVICES = ("mybinder.org", "colab.research.google.com", "/hub/user-redirect/git-pull")

READING_PAGE = """---
jupytext:
  text_representation:
    extension: .md
    format_name: myst
kernelspec:
  display_name: Python 3
  language: python
  name: python3
---
# A reading page

```{code-cell} python
print("read me")
```
"""


def course_config():
    return yaml.safe_load((ROOT / "_config.yml").read_text())


def make_book(folder, repository_url=None):
    """A tiny book with the course's launch settings; repository_url=None keeps the course's."""
    config = course_config()
    repository = copy.deepcopy(config.get("repository", {}))
    if repository_url is not None:
        repository["url"] = repository_url
    book = {
        "title": "launch buttons",
        "only_build_toc_files": True,
        "execute": {"execute_notebooks": "off"},
        "html": {"use_download_button": True},
        "launch_buttons": config["launch_buttons"],
        "repository": repository,
        "sphinx": {"config": {"html_context":
                              config.get("sphinx", {}).get("config", {}).get("html_context", {})},
                   "local_extensions": {"launch_links": "book/_ext"}},
    }
    (folder / "_config.yml").write_text(yaml.safe_dump(book))
    (folder / "_toc.yml").write_text(yaml.safe_dump({
        "format": "jb-book", "root": "intro",
        "chapters": [{"file": f"book/{NAME}",
                      "sections": [{"file": f"notebooks/{NAME}/{NAME}"}]}]}))
    (folder / "intro.md").write_text("# Intro\n\nThe tiny book.\n")
    (folder / "book").mkdir()
    (folder / "book" / f"{NAME}.md").write_text(READING_PAGE)
    (folder / "book" / "_ext").mkdir()
    shutil.copy(ROOT / "book" / "_ext" / "launch_links.py", folder / "book" / "_ext")
    (folder / "notebooks" / NAME).mkdir(parents=True)
    notebook = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("# Exercises"), nbformat.v4.new_code_cell("x = 1")])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                       "language": "python"}
    nbformat.write(notebook, folder / "notebooks" / NAME / f"{NAME}.ipynb")
    if (ROOT / "_static").is_dir():
        shutil.copytree(ROOT / "_static", folder / "_static")


def build(folder):
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "jupyter-book"), "build", str(folder),
         "--warningiserror", "--nitpick", "--keep-going"],
        cwd=folder, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    return folder / "_build" / "html"


def launch_links(page):
    """{service text: href} of the page's launch menu."""
    text = page.read_text(encoding="utf-8")
    menu = re.search(r'<div class="dropdown dropdown-launch-buttons">(.*?)</ul>', text, re.S)
    if not menu:
        return {}
    links = re.findall(r'<a href="([^"]*)".*?btn__text-container">([^<]*)<', menu.group(1), re.S)
    return {name: html.unescape(href) for href, name in links}


def test_the_repository_url_alone_turns_on_binder_and_colab(tmp_path):
    make_book(tmp_path, TEST_URL)
    out = build(tmp_path)

    links = launch_links(out / "notebooks" / NAME / f"{NAME}.html")
    path = f"notebooks/{NAME}/{NAME}.ipynb"
    assert links.get("Binder") == (
        f"https://mybinder.org/v2/gh/example/attention-gradually/main?urlpath=lab/tree/{path}")
    assert links.get("Colab") == (
        f"https://colab.research.google.com/github/example/attention-gradually/blob/main/{path}")
    assert "JupyterHub" not in links, "the hub is an institution's own setting, empty by default"
    # the url is in the launch links, and no page links to another repository (the buttons of the
    # repository, its issues and its pages' sources are off)
    for page in out.rglob("*.html"):
        repos = set(re.findall(r"github\.com/[\w.-]+/[\w.-]+", page.read_text(encoding="utf-8")))
        assert repos <= {"github.com/example/attention-gradually"}, (page, repos)

    # The reading page is a text notebook the students' repository lacks: no launch links in its
    # HTML at all (not hidden by a stylesheet: absent)
    reading = (out / "book" / f"{NAME}.html").read_text(encoding="utf-8")
    assert "dropdown-launch-buttons" not in reading and not any(s in reading for s in SERVICES)
    assert "dropdown-launch-buttons" not in (ROOT / "_static" / "course.css").read_text()


def test_launch_links_stay_only_where_the_students_repository_has_the_file():
    """book/_ext/launch_links.py on the header buttons sphinx-book-theme gives a page (no build)."""
    sys.path.insert(0, str(ROOT / "book" / "_ext"))
    try:
        from launch_links import LAUNCH_GROUP, drop_launch_links, students_have
    finally:
        sys.path.pop(0)
    menu = {"type": "group", "label": LAUNCH_GROUP, "buttons": [{"url": "https://mybinder.org/v2/gh/x/y/main"}]}
    download = {"type": "group", "label": "download-buttons", "buttons": []}
    for pagename, suffix, kept in [(f"notebooks/{NAME}/{NAME}", ".ipynb", True), (f"book/{NAME}", ".md", False),
                                   ("intro", ".md", False), (f"notebooks/{NAME}/other", ".ipynb", False),
                                   (f"notebooks/{NAME}/{NAME}", ".md", False)]:
        context = {"header_buttons": [download, menu], "page_source_suffix": suffix}
        drop_launch_links(None, pagename, "page.html", context, None)
        assert context["header_buttons"] == ([download, menu] if kept else [download]), pagename
        assert students_have(pagename, suffix) == kept


def test_no_url_no_launch_links(tmp_path):
    make_book(tmp_path, "")  # as shipped (a course that sets its url still tests the empty case)
    out = build(tmp_path)
    for page in out.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        assert "dropdown-launch-buttons" not in text, page
        for service in SERVICES:
            assert service not in text, (page, service)


def workflow_guard():
    """The Pages workflow's step that checks repository.url, as a bash script."""
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "book.yml").read_text())
    steps = [step for step in workflow["jobs"]["build"]["steps"] if "THIS_REPOSITORY" in step.get("env", {})]
    assert len(steps) == 1, "book.yml has no step that compares repository.url with its own repository"
    names = [step.get("name") for step in workflow["jobs"]["build"]["steps"]]
    assert names.index(steps[0]["name"]) < names.index("Build the book")
    assert "${{ github.repository }}" in steps[0]["env"]["THIS_REPOSITORY"]
    return steps[0]["run"]


def test_the_pages_workflow_never_points_the_buttons_at_the_private_repository(tmp_path):
    """The workflow runs in the instructors' repository (private: solutions/, tests/mutants/). Its
    guard passes an empty url or the students' repository, and stops the build when the url is the
    repository it runs in, however it is written; no step writes another url into _config.yml."""
    script = workflow_guard()
    steps = yaml.safe_load((ROOT / ".github" / "workflows" / "book.yml").read_text())["jobs"]["build"]["steps"]
    others = [step.get("run", "") for step in steps if step.get("run") != script]
    assert not any("_config.yml" in run for run in others), "a step besides the guard edits _config.yml"
    assert not re.search(r"sed -i|> *_config", script), "the guard edits _config.yml"
    shipped = (ROOT / "_config.yml").read_text()
    assert re.search(r'^  url: ""', shipped, re.M), "the shipped _config.yml's repository.url is not empty"
    private = "https://github.com/example/attention-gradually-instructors"

    def guard(url):
        (tmp_path / "_config.yml").write_text(re.sub(r'^  url: "".*$', f"  url: {url}   # set by the test",
                                                     shipped, count=1, flags=re.M))
        return subprocess.run(["bash", "-e", "-c", script], cwd=tmp_path, capture_output=True, text=True,
                              env={"PATH": "/usr/bin:/bin", "THIS_REPOSITORY": private}, timeout=60)

    for url in ('""', TEST_URL, f'"{TEST_URL}"'):
        result = guard(url)
        assert result.returncode == 0, (url, result.stdout, result.stderr)
    assert f"launch buttons: {TEST_URL}" in guard(TEST_URL).stdout
    for url in (private, f'"{private}.git"', private.replace("example", "Example") + "/"):
        result = guard(url)
        assert result.returncode == 1 and "repository.url is this (instructors') repository" in result.stdout, url
