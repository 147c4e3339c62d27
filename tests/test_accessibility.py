"""Every page of the built book passes axe-core's accessibility rules, in light and dark mode.

axe-core (the npm package in ``tools/axe/``, installed by ``make test``) is injected into each
page of ``_build/html`` opened in headless Chromium; no violation of serious or critical impact
may remain. Under CI the test fails, rather than skips, when axe-core or Chromium is missing.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from test_site import PAGES, visit, wait_for_mathjax

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parent.parent
AXE = ROOT / "tools" / "axe" / "node_modules" / "axe-core" / "axe.min.js"
BLOCKING = ("serious", "critical")

# Rules left out of the check, each with the reason. Keep this empty unless a rule cannot apply.
DISABLED_RULES: dict[str, str] = {}


@pytest.fixture(scope="module")
def axe_source():
    if not AXE.exists():
        reason = f"axe-core is not installed at {AXE} (make test installs it with npm)"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    return AXE.read_text(encoding="utf-8")


def audit(page, axe_source):
    """Run axe-core over the whole page; return its violations (a list of dicts)."""
    page.add_script_tag(content=axe_source)
    options = {"resultTypes": ["violations"],
               "rules": {rule: {"enabled": False} for rule in DISABLED_RULES}}
    return page.evaluate("options => axe.run(document, options).then(r => r.violations)",
                         options)


def describe(violations):
    lines = []
    for violation in violations:
        lines.append(f"{violation['id']} ({violation['impact']}): {violation['help']}")
        for node in violation["nodes"][:3]:
            lines.append(f"    {' '.join(map(str, node['target']))}: "
                         f"{node['failureSummary'].splitlines()[-1].strip()}")
    return "\n".join(lines)


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("path", PAGES)
def test_no_serious_accessibility_violations(browser, site_url, axe_source, path, scheme):
    page, _ = visit(browser, site_url, path, scheme=scheme)
    try:
        wait_for_mathjax(page)
        violations = audit(page, axe_source)
    finally:
        page.context.close()
    blocking = [v for v in violations if v["impact"] in BLOCKING]
    assert blocking == [], describe(blocking)


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
