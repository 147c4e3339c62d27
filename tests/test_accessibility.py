"""Every page of the built book passes axe-core's accessibility rules, in light and dark mode.

axe-core (the npm package in ``tools/axe/``, installed by ``make test``) is injected into each
page of ``_build/html`` opened in headless Chromium at desktop width; no violation of serious or
critical impact may remain. The sweep (``test_site.test_page``) runs the audit on its desktop
visit of each page in each scheme; the test here shows that the audit can fail. Under CI the
tests fail, rather than skip, when axe-core or Chromium is missing.
"""

from __future__ import annotations

import pytest

from pages import BLOCKING, audit, describe, visit

pytestmark = pytest.mark.browser


def test_the_audit_catches_a_violation(browser, site_url, axe_source):
    """The check can fail: an image without alt text and grey-on-white text are reported."""
    page, _ = visit(browser, site_url, "book/intro.html")
    try:
        page.evaluate("""() => {
            const article = document.querySelector('article');
            const img = document.createElement('img');
            img.src = article.ownerDocument.querySelector('img[src]')?.src || 'x.png';
            article.prepend(img);
            const p = document.createElement('p');
            p.textContent = 'faint text that nobody can read';
            p.style.color = '#eeeeee';
            p.style.background = '#ffffff';
            article.prepend(p);
        }""")
        violations = audit(page, axe_source)
    finally:
        page.context.close()
    found = {v["id"] for v in violations if v["impact"] in BLOCKING}
    assert {"image-alt", "color-contrast"} <= found, describe(violations)
