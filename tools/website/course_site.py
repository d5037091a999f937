"""A Sphinx extension of the course's website (loaded by tools/build_site.py through Jupyter Book's
`sphinx.local_extensions`): the pages carry no Thebe.

Jupyter Book 1 always loads sphinx-thebe, which puts its settings script twice on every page (a
JavaScript error: "Identifier 'THEBE_JS_URL' has already been declared") and points at Thebe on a CDN.
The site runs no code in the page (the lessons run in Colab or JupyterLab), so its files are dropped.
"""


def _thebe(asset):
    name = str(getattr(asset, "filename", asset) or "")
    return "thebe" in name or "THEBE_JS_URL" in getattr(asset, "attributes", {}).get("body", "")


def drop_thebe(app, pagename, templatename, context, doctree):
    for key in ("script_files", "css_files"):
        if key in context:
            context[key] = [asset for asset in context[key] if not _thebe(asset)]


def setup(app):
    app.connect("html-page-context", drop_thebe, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
