"""The text's claims in a reader's run (scratchformer.book.claims): a failed assert says which
claim no longer holds, with its values, and the run goes on; what the cell computes does not
change."""

from __future__ import annotations

import io

import numpy as np
import pytest

from scratchformer.book import claims as C


def run(source: str, namespace: dict | None = None, label: str = "cell 3"):
    out = io.StringIO()
    claims = C.Claims(stream=out)
    tree = C.compile_cell(source, claims, label)
    namespace = {C.NAME: claims, "np": np, **(namespace or {})}
    claims.cell_started()
    exec(compile(tree, "<cell>", "exec"), namespace)
    claims.cell_finished()
    return out.getvalue(), namespace, claims


def test_a_failed_claim_names_itself_its_comment_and_its_value_and_the_cell_goes_on():
    text, namespace, _ = run(
        "exact = {1.0: (30.0, 0.93)}\n"
        "soft = 1.0\n"
        "assert 0.5 < exact[soft][1] < 0.8  # c = 1: a blend, led by the match\n"
        "after = 'reached'\n")
    assert namespace["after"] == "reached"
    assert "The text's claim no longer holds with these numbers (cell 3, line 3):" in text
    assert "assert 0.5 < exact[soft][1] < 0.8  # c = 1: a blend, led by the match" in text
    assert "exact[soft][1] = 0.93" in text
    assert "AssertionError" not in text


def test_a_claim_that_holds_prints_nothing():
    text, _, _ = run("x = 2.0\nassert 1 < x < 3  # a claim that holds\n")
    assert text == ""


def test_the_comment_block_above_and_the_message_are_shown():
    text, _, _ = run("w = np.array([0.2, 0.3])\n"
                     "# ... and from those two keys alone\n"
                     "assert w.sum() > 0.999, f'share {w.sum():.2f}'\n")
    assert "# ... and from those two keys alone" in text
    assert "its message: share 0.50" in text


def test_arrays_are_described_by_shape_and_range():
    text, _, _ = run("x = np.arange(20.0)\nassert np.allclose(x, x + 1)\n")
    assert "x = array of shape (20,), from 0 to 19" in text
    assert "x + 1 = array of shape (20,), from 1 to 20" in text


def test_the_message_is_evaluated_only_when_the_claim_fails():
    text, namespace, _ = run("calls = []\n"
                             "assert True, calls.append(1)\n"
                             "assert False, calls.append(2)\n")
    assert namespace["calls"] == [2]


def test_each_operand_is_evaluated_once():
    text, namespace, _ = run("seen = []\n"
                             "def f(v):\n"
                             "    seen.append(v)\n"
                             "    return v\n"
                             "assert f(1) < f(2) < f(0) and f(5)\n")
    assert namespace["seen"] == [1, 2, 0]  # the chain stops where Python's does
    assert "f(0) = 0" in text


def test_a_claim_in_a_loop_is_reported_once_with_how_often_it_failed():
    text, _, _ = run("for i in range(5):\n    assert i < 2\n")
    assert text.count("no longer holds") == 1
    assert "i = 2" in text
    assert "failed 2 more times in this run of the cell" in text


def test_claims_inside_functions_are_rewritten_too():
    text, namespace, _ = run("def f(y):\n    assert y > 0\n    return 2 * y\nr = f(-1)\n")
    assert namespace["r"] == -2 and "y = -1" in text


def test_other_errors_still_raise():
    with pytest.raises(ZeroDivisionError):
        run("assert 1 / 0 > 0\n")


def test_without_the_rewriting_the_same_code_fails_hard():
    """The build runs the chapters as written: the same claim is a bare AssertionError."""
    with pytest.raises(AssertionError):
        exec("x = 0.93\nassert 0.5 < x < 0.8\n", {})


def test_reader_run_rewrites_the_cells_an_ipython_shell_runs():
    pytest.importorskip("IPython")
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    try:
        out = io.StringIO()
        claims = C.reader_run(shell)
        assert C.reader_run(shell) is claims  # once
        claims.stream = out
        result = shell.run_cell("weight = 0.93\nassert 0.5 < weight < 0.8  # a blend\n"
                                "done = True")
        assert result.success and shell.user_ns["done"] is True
        assert "weight = 0.93" in out.getvalue() and "# a blend" in out.getvalue()
        assert shell.run_cell("assert 1 < 2").success and "1 < 2" not in out.getvalue()
    finally:
        InteractiveShell.clear_instance()


def test_reader_run_outside_ipython_leaves_the_asserts_alone():
    pytest.importorskip("IPython")
    assert C.reader_run() is None
    with pytest.raises(AssertionError):
        exec("assert 1 > 2", {})


def test_numpy_testing_asserts_are_claims_too():
    text, namespace, _ = run("x = np.array([1.0, 2.0])\n"
                             "np.testing.assert_allclose(x, [1.0, 2.5], rtol=0.01)  # close\n"
                             "after = True\n")
    assert namespace["after"] is True
    assert "np.testing.assert_allclose(x, [1.0, 2.5], rtol=0.01)  # close" in text
    assert "Not equal to tolerance rtol=0.01" in text  # NumPy's own account
    held, _, _ = run("np.testing.assert_array_equal(np.arange(2), [0, 1])\n")
    assert held == ""
