"""The API reference page: every export of the package, linked from and to the chapters."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import scratchformer

ROOT = Path(__file__).resolve().parent.parent
SITE = ROOT / "_build" / "html"


@pytest.fixture(scope="module")
def api_page():
    page = SITE / "book" / "api.html"
    if not page.exists():
        pytest.skip("no built site: run `make book` first (`make test` does)")
    return page.read_text(encoding="utf-8")


def test_every_export_is_documented(api_page):
    ids = set(re.findall(r'id="(scratchformer\.[\w.]+)"', api_page))
    missing = [name for name in scratchformer.__all__ if f"scratchformer.{name}" not in ids]
    assert missing == []


def test_docstrings_link_back_to_the_chapters_that_derive_them(api_page):
    chapters = set(re.findall(r'href="(\w+)\.html"', api_page))
    assert {"scaled_dot_product_attention", "multi_head_attention", "positional_encoding",
            "transformer_block", "recurrence", "scaling", "failure_cases"} <= chapters


def test_equations_and_shapes_are_rendered(api_page):
    assert api_page.count('class="math') >= 5  # Notes equations, typeset by MathJax
    assert re.search(r"shape \((…|\.\.\.), n_q, d_k\)", api_page)  # smart quotes make "…"


@pytest.mark.parametrize("chapter, target", [
    ("scaled_dot_product_attention", "scratchformer.scaled_dot_product_attention"),
    ("multi_head_attention", "scratchformer.MultiHeadAttention"),
    ("transformer_block", "scratchformer.EncoderBlock.from_torch"),
])
def test_chapters_link_to_the_reference(chapter, target):
    page = SITE / "book" / f"{chapter}.html"
    if not page.exists():
        pytest.skip("no built site")
    assert f'href="api.html#{target}"' in page.read_text(encoding="utf-8")
