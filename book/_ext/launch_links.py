"""Launch links only where the students' repository has the file. The launch menu (Binder, Colab,
a hub) opens the page's source file in the students' repository (`repository.url`), which holds
the exercise notebooks alone, `notebooks/<a>/<a>.ipynb` (student/make_copy.py): a reading page's
links (book/<a>.md) would open a file it lacks, so they are removed from the page's HTML here,
after sphinx-book-theme adds them (its `add_launch_buttons` runs at priority 501)."""

LAUNCH_GROUP = "launch-buttons"   # sphinx-book-theme's label of the launch menu in `header_buttons`


def students_have(pagename, source_suffix):
    """Whether the students' repository holds the page's source: notebooks/<a>/<a>.ipynb."""
    parts = pagename.split("/")
    return source_suffix == ".ipynb" and len(parts) == 3 and parts[0] == "notebooks" and parts[1] == parts[2]


def without_launch_links(header_buttons, pagename, source_suffix):
    """The page's header buttons, the launch menu left out unless the students have its file."""
    if students_have(pagename, source_suffix):
        return header_buttons
    return [b for b in header_buttons if not (isinstance(b, dict) and b.get("label") == LAUNCH_GROUP)]


def drop_launch_links(app, pagename, templatename, context, doctree):
    if context.get("header_buttons"):
        context["header_buttons"] = without_launch_links(context["header_buttons"], pagename,
                                                         context.get("page_source_suffix", ""))


def setup(app):
    app.connect("html-page-context", drop_launch_links, priority=502)  # after the theme's (501)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
