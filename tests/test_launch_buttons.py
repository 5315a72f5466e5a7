"""Launch buttons come from one setting: `repository.url` in _config.yml.

A tiny Jupyter Book (a reading page written as a MyST text notebook, and a student notebook
at notebooks/<a>/<a>.ipynb, as in the course) is built in a temporary folder with the
repository's own `launch_buttons`, `repository` and `html_context` settings and its
`_static/`, nothing executed; each build takes a few seconds.

- With the url set, the student notebook's page launches that notebook on Binder and Colab,
  and the reading page's launch links (to a .md file, which Colab cannot open) are the ones
  _static/course.css hides.
- With the url empty, as shipped, the book builds without a warning and links to no launch
  service at all.
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
                              config.get("sphinx", {}).get("config", {}).get("html_context", {})}},
    }
    (folder / "_config.yml").write_text(yaml.safe_dump(book))
    (folder / "_toc.yml").write_text(yaml.safe_dump({
        "format": "jb-book", "root": "intro",
        "chapters": [{"file": f"book/{NAME}",
                      "sections": [{"file": f"notebooks/{NAME}/{NAME}"}]}]}))
    (folder / "intro.md").write_text("# Intro\n\nThe tiny book.\n")
    (folder / "book").mkdir()
    (folder / "book" / f"{NAME}.md").write_text(READING_PAGE)
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

    # The reading page is a text notebook: its launch links open the .md file, which Colab
    # cannot, and the course's stylesheet hides that menu.
    reading = launch_links(out / "book" / f"{NAME}.html")
    assert reading and all(href.endswith(".md") for href in reading.values()), reading
    css = (ROOT / "_static" / "course.css").read_text()
    assert '.dropdown-launch-buttons:has(a[href$=".md"]' in css


def test_no_url_no_launch_links(tmp_path):
    make_book(tmp_path, "")  # as shipped (a course that sets its url still tests the empty case)
    out = build(tmp_path)
    for page in out.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        assert "dropdown-launch-buttons" not in text, page
        for service in SERVICES:
            assert service not in text, (page, service)
