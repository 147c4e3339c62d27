"""The text's claims in a reader's run: a claim that a change makes false says so, and the
run goes on.

Every chapter asserts what its text claims (``assert 0.5 < weight < 0.8  # a blend``), so that
the build fails as soon as a claim stops being true. A reader who changes a number in a
downloaded notebook or in a live cell of the page is not building the book: for them a failed
claim is news, not an error. :func:`reader_run` (the downloaded notebooks call it in their first
cell) rewrites every ``assert`` of the cells IPython runs afterwards, and :func:`compile_cell`
does the same for the page's live cells: instead of raising a bare ``AssertionError``, a claim
that no longer holds prints which claim it is (its code, its comment, the message it carries)
and the values it compared, and the cell goes on::

    The text's claim no longer holds with these numbers (cell 5, line 12):
        assert 0.5 < exact[soft][1] < 0.8  # c = 1: a blend, led by the match
        exact[soft][1] = 0.924142

The rewriting keeps what the claim computes: each operand of a comparison (and each argument
of a call such as ``np.allclose``) is evaluated once, as before, and only recorded on the way;
the message of ``assert test, message`` is evaluated only when the claim fails, as Python does.
Nothing else of the cell is touched, and the build, which runs the chapters without this
module, keeps failing hard on every claim.
"""

from __future__ import annotations

import ast
import io
import sys
import tokenize
from dataclasses import dataclass, field

import numpy as np

__all__ = ["Claims", "compile_cell", "reader_run", "rewrite"]

#: The name the rewritten cells call; :func:`reader_run` binds it in the user's namespace.
NAME = "_scratchformer_claims"
NOTE = ("The text's claim no longer holds with these numbers{where}:")
AFTER = ("The text's numbers come from the book's build; this run goes on.")


@dataclass
class Claim:
    """One ``assert`` of a cell: its code as written (with its comments) and where it is."""

    code: str
    where: str
    operands: list[str] = field(default_factory=list)


class Claims:
    """The claims of the cells rewritten so far and the failures of the cell running now.

    A claim that fails is reported once per run of its cell (a claim asserted in a loop would
    otherwise print a page); how many more times it failed is said when the cell ends.
    """

    def __init__(self, stream=None, write=None):
        self.claims: list[Claim] = []
        self.stream, self.write = stream, write
        self._values: dict[int, dict[int, object]] = {}
        self._repeats: dict[int, int] = {}
        self.failures: list[str] = []  # every report of this process, in order

    # What the rewritten code calls ---------------------------------------------------------
    def value(self, claim: int, index: int, value):
        """Record operand ``index`` of ``claim`` on its way into the comparison; returns it."""
        self._values.setdefault(claim, {})[index] = value
        return value

    def start(self, claim: int) -> None:
        self._values.pop(claim, None)

    def failed(self, claim: int, message=None) -> None:
        """Report that ``claim`` no longer holds (once per run of its cell)."""
        values = self._values.pop(claim, {})
        if claim in self._repeats:
            self._repeats[claim] += 1
            return
        self._repeats[claim] = 0
        record = self.claims[claim]
        lines = [NOTE.format(where=f" ({record.where})" if record.where else "")]
        lines += ["    " + line for line in record.code.splitlines()]
        if message is not None:
            lines += ["    " + line for line in f"its message: {message}".strip().splitlines()]
        shown = set()
        for index, source in enumerate(record.operands):
            if index in values and source not in shown:
                shown.add(source)
                lines.append(f"    {source} = {describe(values[index])}")
        lines.append(AFTER)
        self._write("\n".join(lines))

    # The cell's life -------------------------------------------------------------------------
    def cell_started(self, *_) -> None:
        self._repeats.clear()
        self._values.clear()

    def cell_finished(self, *_) -> None:
        for claim, more in self._repeats.items():
            if more:
                where = self.claims[claim].where
                self._write(f"(The claim of {where} failed {more} more "
                            f"time{'s' if more > 1 else ''} in this run of the cell.)")
        self._repeats.clear()

    def _write(self, text: str) -> None:
        self.failures.append(text)
        if self.write is not None:
            self.write(text)
            return
        stream = self.stream if self.stream is not None else sys.stderr
        print(text, file=stream, flush=True)


def describe(value) -> str:
    """A short, readable account of a compared value: numbers to six significant digits, small
    arrays in full, large ones by shape and range."""
    if isinstance(value, (bool, np.bool_)):
        return str(bool(value))
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        return f"{float(value):.6g}"
    if isinstance(value, np.ndarray):
        if value.size <= 8:
            return np.array2string(value, precision=6, separator=", ")
        if np.issubdtype(value.dtype, np.number) and value.size:
            finite = value[np.isfinite(value)] if np.issubdtype(value.dtype, np.floating) else value
            span = (f", from {describe(finite.min())} to {describe(finite.max())}"
                    if finite.size else ", none finite")
            return f"array of shape {value.shape}{span}"
        return f"array of shape {value.shape}"
    text = repr(value)
    return text if len(text) <= 100 else text[:97] + "..."


# The rewriting ---------------------------------------------------------------------------------
def _interesting(node: ast.AST) -> bool:
    """Whether an operand's value says something its code does not (not a literal)."""
    if isinstance(node, ast.Constant):
        return False
    if isinstance(node, ast.UnaryOp) and isinstance(node.operand, ast.Constant):
        return False
    if isinstance(node, (ast.Tuple, ast.List)) and not any(map(_interesting, node.elts)):
        return False
    return not isinstance(node, (ast.Lambda, ast.GeneratorExp))


class _Rewriter(ast.NodeTransformer):
    def __init__(self, claims: Claims, lines: list[str], comments: dict[int, str], label: str):
        self.claims, self.lines, self.comments, self.label = claims, lines, comments, label

    def _code(self, node: ast.stmt, word: str = "assert") -> str:
        """The claim as written, with its comment (or the comment block right above it)."""
        end = getattr(node, "end_lineno", node.lineno) or node.lineno
        if 0 < node.lineno <= len(self.lines) and word in self.lines[node.lineno - 1]:
            written = [self.lines[number - 1].strip() for number in range(node.lineno, end + 1)]
            code = "\n".join(written)
            if not any(number in self.comments for number in range(node.lineno, end + 1)):
                above, number = [], node.lineno - 1
                while number in self.comments and self.lines[number - 1].lstrip().startswith("#"):
                    above.insert(0, self.lines[number - 1].strip())
                    number -= 1
                code = "\n".join(above + [code])
            return code
        return ast.unparse(node)

    def _register(self, node: ast.stmt, word: str = "assert") -> tuple[int, Claim]:
        """Number the claim ``node`` makes and keep its code and place for the report."""
        where = f"{self.label}, line {node.lineno}" if self.label else f"line {node.lineno}"
        self.claims.claims.append(Claim(self._code(node, word), where))
        return len(self.claims.claims) - 1, self.claims.claims[-1]

    def _record(self, node: ast.AST, claim: int, operands: list[str]) -> ast.AST:
        operands.append(ast.unparse(node))
        return _call("value", ast.Constant(claim), ast.Constant(len(operands) - 1), node)

    def _wrap(self, node: ast.AST, claim: int, operands: list[str]) -> ast.AST:
        """Record the operands of the test's comparisons and of its outermost call, keeping
        its evaluation."""
        if isinstance(node, ast.BoolOp):
            node.values = [self._wrap(value, claim, operands) for value in node.values]
            return node
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            node.operand = self._wrap(node.operand, claim, operands)
            return node
        if isinstance(node, ast.Compare):
            parts = [node.left, *node.comparators]
            wrapped = [self._record(part, claim, operands) if _interesting(part) else part
                       for part in parts]
            node.left, node.comparators = wrapped[0], wrapped[1:]
            return node
        if isinstance(node, ast.Call):
            node.args = [self._record(arg, claim, operands)
                         if _interesting(arg) and not isinstance(arg, ast.Starred) else arg
                         for arg in node.args]
            for keyword in node.keywords:
                if keyword.arg is not None and _interesting(keyword.value):
                    keyword.value = self._record(keyword.value, claim, operands)
            return node
        if _interesting(node):
            return self._record(node, claim, operands)
        return node

    def visit_Expr(self, node: ast.Expr):
        """``np.testing.assert_allclose(...)`` and its kind: a claim too, reported with
        NumPy's own account of what differs."""
        call = node.value
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                and call.func.attr.startswith("assert_")):
            return self.generic_visit(node)
        claim, _ = self._register(node, "assert_")
        name = f"_{NAME}_error"
        message = ast.Call(func=ast.Name(id="str", ctx=ast.Load()),
                           args=[ast.Name(id=name, ctx=ast.Load())], keywords=[])
        guarded = ast.Try(body=[node], handlers=[ast.ExceptHandler(
            type=ast.Name(id="AssertionError", ctx=ast.Load()), name=name,
            body=[ast.Expr(_call("failed", ast.Constant(claim), message))])],
            orelse=[], finalbody=[])
        return ast.copy_location(guarded, node)

    def visit_Assert(self, node: ast.Assert):
        claim, record = self._register(node)
        test = self._wrap(node.test, claim, record.operands)
        start = ast.Expr(_call("start", ast.Constant(claim)))
        message = [node.msg] if node.msg is not None else []
        report = ast.Expr(_call("failed", ast.Constant(claim), *message))
        check = ast.If(test=ast.UnaryOp(op=ast.Not(), operand=test), body=[report], orelse=[])
        return [ast.copy_location(start, node), ast.copy_location(check, node)]


def _call(method: str, *args: ast.expr) -> ast.Call:
    """``_scratchformer_claims.<method>(*args)``: what the rewritten code calls."""
    return ast.Call(func=ast.Attribute(value=ast.Name(id=NAME, ctx=ast.Load()), attr=method,
                                       ctx=ast.Load()), args=list(args), keywords=[])


def _comments(source: str) -> dict[int, str]:
    comments = {}
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type == tokenize.COMMENT:
                comments[token.start[0]] = token.string
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass
    return comments


def rewrite(tree: ast.Module, source: str, claims: Claims, label: str = "") -> ast.Module:
    """``tree`` (parsed from ``source``) with every ``assert`` turned into a reported claim."""
    tree = _Rewriter(claims, source.splitlines(), _comments(source), label).visit(tree)
    return ast.fix_missing_locations(tree)


def compile_cell(source: str, claims: Claims, label: str = "", filename: str = "<cell>"):
    """Parse and rewrite a cell's ``source``; returns the module's AST, ready for
    ``compile(..., "exec")`` (the page's live cells run it with its last expression shown)."""
    return rewrite(ast.parse(source, filename), source, claims, label)


class _IPythonTransformer(ast.NodeTransformer):
    """IPython's hook: it hands over the parsed cell; the source comes from ``pre_run_cell``."""

    def __init__(self, claims: Claims, shell):
        self.claims, self.shell, self.source = claims, shell, ""

    def pre_run_cell(self, info) -> None:
        self.source = getattr(info, "raw_cell", "") or ""
        self.claims.cell_started()

    def visit_Module(self, node: ast.Module) -> ast.Module:
        label = f"In [{self.shell.execution_count}]"
        return rewrite(node, self.source, self.claims, label)


def reader_run(shell=None) -> Claims | None:
    """From the next cell on, in this IPython kernel, a failed ``assert`` reports the claim
    and the values it compared, and the cell goes on (see the module). Returns the
    :class:`Claims` it reports into; calling it again changes nothing. Outside IPython (a
    script) it does nothing and returns None."""
    if shell is None:
        from IPython import get_ipython

        shell = get_ipython()
    if shell is None:  # a script (the notebook exported, say): its asserts stay as they are
        return None
    existing = shell.user_ns.get(NAME)
    if isinstance(existing, Claims):
        return existing
    claims = Claims()
    transformer = _IPythonTransformer(claims, shell)
    shell.user_ns[NAME] = claims
    shell.ast_transformers.append(transformer)
    shell.events.register("pre_run_cell", transformer.pre_run_cell)
    shell.events.register("post_run_cell", claims.cell_finished)
    return claims
