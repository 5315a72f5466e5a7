"""A term's book (`make book CHAPTERS=...`, book/term.py): a link to a chapter not yet released
shows as plain text, without a warning.

The intro lists every chapter and the glossary links the chapter of each term; in a term's book
the later chapters are not built, so those links have no target. Each such warning is dropped if
what it names is a chapter not released (`term_unreleased`) or a label defined in one of their
pages; any other warning still fails the build (`--warningiserror`).
"""
import logging
import re
from pathlib import Path

MISSING = ("not found", "undefined label", "Unknown source document")  # Sphinx's, sphinx-proof's, MyST's words
NAMES = re.compile(r"[\w./-]+")


class UnreleasedLinks(logging.Filter):
    def __init__(self, chapters, labels):
        super().__init__()
        self.chapters, self.labels = set(chapters), set(labels)

    def filter(self, record):
        if record.levelno != logging.WARNING:
            return True
        message = record.getMessage()
        if not any(words in message for words in MISSING):
            return True
        return not any(Path(n).stem in self.chapters or n in self.labels for n in NAMES.findall(message))


def _labels(page):
    """The labels a page defines: MyST targets `(name)=` and directives' `:label: name`."""
    text = page.read_text(encoding="utf-8")
    return set(re.findall(r"^\((\S+)\)=\s*$", text, re.M)) | set(re.findall(r"^\s*:label:\s*(\S+)", text, re.M))


def _install(app, config):
    chapters = list(config.term_unreleased)
    if not chapters:
        return
    labels = set().union(*(_labels(Path(app.srcdir) / "book" / f"{a}.md") for a in chapters))
    keep = UnreleasedLinks(chapters, labels)
    for handler in logging.getLogger("sphinx").handlers:  # before the filter that makes a warning an error
        handler.filters.insert(0, keep)


def setup(app):
    app.add_config_value("term_unreleased", [], "env")
    app.connect("config-inited", _install)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
