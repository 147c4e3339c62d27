"""Weight of every chapter page of the built site: its HTML plus the images it shows.

Usage: ``python benchmarks/page_weight.py [--site _build/html]`` (after ``make book``)

Prints, per page of ``_toc.yml``, the bytes of the page's HTML file and of the image files its
``<img>`` tags load (each counted once), and their sum against the target of at most 1 MB
(10^6 bytes) a chapter. The theme's CSS, JavaScript and fonts are shared by every page and
cached after the first, so they are left out. Exits with status 1 when a page is over target.
"""

from __future__ import annotations

import argparse
import html.parser
import sys
from pathlib import Path
from urllib.parse import unquote, urlparse

import yaml

ROOT = Path(__file__).resolve().parent.parent
TARGET_BYTES = 1_000_000


class _Images(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.sources: list[str] = []

    def handle_starttag(self, tag, attrs):
        src = dict(attrs).get("src")
        if tag == "img" and src and not urlparse(src).scheme and not src.startswith("data:"):
            self.sources.append(unquote(urlparse(src).path))


def toc_pages(root: Path = ROOT) -> list[str]:
    toc = yaml.safe_load((root / "_toc.yml").read_text())
    return [toc["root"]] + [chapter["file"] for part in toc.get("parts", [])
                            for chapter in part["chapters"]]


def page_weight(site: Path, page: str) -> tuple[int, int, int]:
    """(HTML bytes, image bytes, number of images) of ``page`` (a docname, e.g. book/scaling)."""
    path = site / f"{page}.html"
    parser = _Images()
    parser.feed(path.read_text(encoding="utf-8"))
    images = {(path.parent / src).resolve() for src in parser.sources}
    return path.stat().st_size, sum(image.stat().st_size for image in images), len(images)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--site", type=Path, default=ROOT / "_build" / "html")
    args = parser.parse_args()
    print(f"{'page':<40} {'HTML':>9} {'images':>10} {'n':>3} {'total':>10}  target <= 1 MB")
    over = 0
    for page in toc_pages():
        html_bytes, image_bytes, count = page_weight(args.site, page)
        total = html_bytes + image_bytes
        verdict = "ok" if total <= TARGET_BYTES else "OVER"
        over += total > TARGET_BYTES
        print(f"{page:<40} {html_bytes:>9,} {image_bytes:>10,} {count:>3} {total:>10,}  {verdict}")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
