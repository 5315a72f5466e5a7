"""Each script once per page. sphinx-thebe (which Jupyter Book 1.x always loads) registers its
inline `const THEBE_JS_URL = ...` twice under Sphinx 7.4, and the second copy is a console
error on every page ("Identifier 'THEBE_JS_URL' has already been declared"); sphinx-togglebutton's
selector is repeated the same way."""


def drop_repeated_scripts(app, pagename, templatename, context, doctree):
    seen, unique = set(), []
    for script in context.get("script_files", []):
        # what the page will hold: an inline script's filename is None from one caller, "" from another
        key = (getattr(script, "filename", script) or "", tuple(sorted(getattr(script, "attributes", {}).items())))
        if key not in seen:
            seen.add(key)
            unique.append(script)
    context["script_files"] = unique


def setup(app):
    app.connect("html-page-context", drop_repeated_scripts)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
