"""The API reference page: every export of the package, linked from and to the chapters."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import scratchformer
import scratchformer.book
import scratchformer.pytorch
import scratchformer.train

pytestmark = pytest.mark.site  # reads the built book in _build/html

ROOT = Path(__file__).resolve().parent.parent
SITE = ROOT / "_build" / "html"


@pytest.fixture(scope="module")
def api_page():
    page = SITE / "book" / "api.html"
    if not page.exists():
        pytest.skip("no built site: run `make book` first (`make test` does)")
    return page.read_text(encoding="utf-8")


@pytest.mark.parametrize("package", [scratchformer, scratchformer.train, scratchformer.book,
                                     scratchformer.pytorch], ids=lambda p: p.__name__)
def test_every_export_is_documented_once(api_page, package):
    ids = re.findall(r'id="(scratchformer\.[\w.]+)"', api_page)
    names = [f"{package.__name__}.{name}" for name in package.__all__]
    assert [name for name in names if ids.count(name) != 1] == []


def test_the_model_and_the_tooling_have_sections_of_their_own(api_page):
    """The page is grouped: the model, the book's tooling, PyTorch; a section per module."""
    headings = re.findall(r"<h2>(.*?)<a", api_page)
    assert [re.sub("<.*?>", "", h) for h in headings] == [
        "The model and its training: scratchformer",
        "The book’s tooling: scratchformer.book",
        "PyTorch: scratchformer.pytorch"]
    sections = re.findall(r"<h3>(.*?)<a", api_page)
    assert len(sections) >= 15  # one per module that exports something
    model_part = api_page[:api_page.index("<h2>The book’s tooling")]
    assert 'id="scratchformer.MultiHeadAttention"' in model_part
    assert 'id="scratchformer.book.attention_heatmap"' in api_page
    assert 'id="scratchformer.book.attention_heatmap"' not in model_part


def test_docstrings_link_back_to_the_chapters_that_derive_them(api_page):
    chapters = set(re.findall(r'href="(\w+)\.html"', api_page))
    assert {"scaled_dot_product_attention", "multi_head_attention", "positional_encoding",
            "transformer_block", "recurrence", "scaling", "failure_cases"} <= chapters


def test_signatures_show_defaults_as_written(api_page):
    """``dtype=np.float64``, not the repr ``dtype=<class 'numpy.float64'>`` (21 signatures)."""
    assert "&lt;class" not in api_page
    assert "dtype=np.float64" in re.sub(r"<.*?>", "", api_page)


def test_equations_and_shapes_are_rendered(api_page):
    assert api_page.count('class="math') >= 5  # Notes equations, typeset by MathJax
    assert re.search(r"shape \((…|\.\.\.), n_q, d_k\)", api_page)  # smart quotes make "…"


@pytest.mark.parametrize("chapter, target", [
    ("scaled_dot_product_attention", "scratchformer.scaled_dot_product_attention"),
    ("multi_head_attention", "scratchformer.MultiHeadAttention"),
    ("transformer_block", "scratchformer.pytorch.from_torch"),
])
def test_chapters_link_to_the_reference(chapter, target):
    page = SITE / "book" / f"{chapter}.html"
    if not page.exists():
        pytest.skip("no built site")
    assert f'href="api.html#{target}"' in page.read_text(encoding="utf-8")
