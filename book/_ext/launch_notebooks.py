"""Point the Colab and Binder buttons at a notebook that exists.

The book theme links a page's launch buttons to its source file on the repository's branch.
Our chapters are MyST Markdown (``book/*.md``), which Colab cannot open at all (it reads only
``.ipynb``), and no ``.ipynb`` is committed. The publishing workflow
(``.github/workflows/pages.yml``) therefore puts the notebook each page offers for download
(executed, its Markdown plain, a first cell that installs the package at the commit the book
was built from: ``tools/downloadable.py``) on the branch named below (``tools/notebooks.py``);
this extension rewrites the two buttons to open that notebook. The repository comes from the one
setting, ``repository: url:`` in ``_config.yml``, as every other button's does.
"""

from __future__ import annotations

NOTEBOOKS_BRANCH = "notebooks"


def notebook_launch_urls(options: dict, org: str, repo: str, pagename: str) -> dict[str, str]:
    """The Colab and Binder URLs of page ``pagename`` (those of the configured services)."""
    launch = options.get("launch_buttons", {})
    notebook = f"{pagename}.ipynb"
    urls = {}
    if launch.get("colab_url"):
        colab = launch["colab_url"].rstrip("/")
        urls["Colab"] = f"{colab}/github/{org}/{repo}/blob/{NOTEBOOKS_BRANCH}/{notebook}"
    if launch.get("binderhub_url"):
        binder = launch["binderhub_url"].rstrip("/")
        interface = {"classic": "tree", "jupyterlab": "lab/tree"}[
            launch.get("notebook_interface", "classic")]
        urls["Binder"] = (f"{binder}/v2/gh/{org}/{repo}/{NOTEBOOKS_BRANCH}"
                          f"?urlpath={interface}/{notebook}")
    return urls


def retarget_launch_buttons(app, pagename, templatename, context, doctree):
    org, repo = context.get("github_user"), context.get("github_repo")
    groups = [b for b in context.get("header_buttons", []) if b.get("label") == "launch-buttons"]
    if not groups or not org or not repo:
        return
    urls = notebook_launch_urls(app.config.html_theme_options, org, repo, pagename)
    for button in groups[0]["buttons"]:
        if button.get("text") in urls:
            button["url"] = urls[button["text"]]


def setup(app):
    # After the book theme has made its buttons (it does so at priority 501).
    app.connect("html-page-context", retarget_launch_buttons, priority=600)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
