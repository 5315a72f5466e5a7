"""The book of a term released chapter by chapter: `make book CHAPTERS="01-weights 02-global-attention"`.

A chapter's reading and notebook give the answers of the earlier chapters' exercises by design, so
a term publishes a chapter only once the chapters before it are due (book/instructors.md). This
writes, under _build/term/, the book's table of contents with the released chapters only (and the
guides), and its configuration, which names the chapters not released: a link to one of them (the
intro lists every chapter, the glossary links each term's) shows as plain text, its warning
dropped by book/_ext/term_links.py; every other warning still fails the build. Pages not in the
table of contents are not built (`only_build_toc_files`).

    .venv/bin/python book/term.py "01-weights 02-global-attention"   # prints the jupyter-book options
"""
import os
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "_build" / "term"


def term_toc(chosen):
    """_toc.yml without the chapters not in `chosen` (each a reading `book/<a>` with its notebook)."""
    from autograder import assignments
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    for part in toc["parts"]:
        part["chapters"] = [c for c in part["chapters"]
                            if Path(c["file"]).name not in assignments() or Path(c["file"]).name in chosen]
    return toc


def term_config(chosen):
    """_config.yml, with book/_ext/term_links.py told the chapters not released."""
    from autograder import assignments
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    extensions = config["sphinx"].setdefault("local_extensions", {})
    extensions["term_links"] = "book/_ext"
    for name, path in extensions.items():  # paths from the configuration's folder
        extensions[name] = os.path.relpath(ROOT / path, OUT)
    config["sphinx"].setdefault("config", {})["term_unreleased"] = [a for a in assignments() if a not in chosen]
    return config


def write(chosen):
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "_toc.yml").write_text(yaml.safe_dump(term_toc(chosen), sort_keys=False), encoding="utf-8")
    (OUT / "_config.yml").write_text(yaml.safe_dump(term_config(chosen), sort_keys=False), encoding="utf-8")
    return OUT


if __name__ == "__main__":
    sys.path[:0] = [str(ROOT), str(ROOT / "student")]
    from make_copy import released
    out = write(released(sys.argv[1] if len(sys.argv) > 1 else None))
    print(f"--toc {out / '_toc.yml'} --config {out / '_config.yml'} --path-output {out}")
