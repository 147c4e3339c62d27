"""Keep the page's bookkeeping out of the code a reader reads.

A chapter glues the values its prose prints (``glue(name, value, display=False)``). In a cell
the reader sees, those calls bury the few lines that teach. This moves every top-level glue
call of a visible code cell into a hidden cell (``:tags: [remove-cell]``) right after it, or
to the top of the hidden cell already there, where the move cannot change what the cell
computes or shows: no later statement of the cell rebinds or mutates a name the call reads
(assigns it, its items or attributes, or calls one of its methods), and the cell's last
expression, which Jupyter displays, stays what it was. Calls inside loops or functions, and
cells the check cannot parse, are left alone.

Usage: ``python -m tools.bookkeeping book/*.md`` rewrites the chapters;
``tests/test_bookkeeping.py`` requires that it would move nothing.
"""
import ast
import builtins
import re
import sys
from pathlib import Path

CELL = re.compile(r"^```\{code-cell\} ipython3\n(?P<body>.*?)^```\n", re.S | re.M)
SHOWN_NONE = {"print", "show", "display", "close"}
MODULES = {"np", "math", "sf", "sfb", "tr", "torch", "plt", "F", "nn", "re", "textwrap"}


def split_header(body):
    lines = body.splitlines(keepends=True)
    i = 0
    if lines and lines[0].strip() == "---":
        j = 1
        while lines[j].strip() != "---":
            j += 1
        i = j + 1
    while i < len(lines) and lines[i].startswith(":"):
        i += 1
    return "".join(lines[:i]), "".join(lines[i:])


def names(node, ctx=None):
    """The variable names a node uses (in the context ``ctx`` only, if given)."""
    return {n.id for n in ast.walk(node)
            if isinstance(n, ast.Name) and (ctx is None or isinstance(n.ctx, ctx))}


def root(node):
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def changed(stmt):
    """Names a statement may rebind or mutate: stored, deleted, defined, imported, or the
    root of an assigned attribute or item or of a called method."""
    out = names(stmt, (ast.Store, ast.Del))
    for n in ast.walk(stmt):
        if isinstance(n, (ast.FunctionDef, ast.ClassDef)):
            out.add(n.name)
        elif isinstance(n, ast.alias):
            out.add((n.asname or n.name).split(".")[0])
        elif (isinstance(n, (ast.Attribute, ast.Subscript))
              and isinstance(n.ctx, (ast.Store, ast.Del))):
            out.add(root(n))
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute):
            out.add(root(n.func))
    return out - {None}


def is_glue(stmt):
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
        return False
    call = stmt.value
    return (isinstance(call.func, ast.Name) and call.func.id == "glue"
            and any(k.arg == "display" and isinstance(k.value, ast.Constant)
                    and k.value.value is False for k in call.keywords))


def shows_nothing(stmt):
    if not isinstance(stmt, ast.Expr):
        return True
    v = stmt.value
    if isinstance(v, ast.Call):
        f = v.func
        name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
        return name in SHOWN_NONE
    return False


def transform(code):
    """(kept code, moved code) or None."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    body = tree.body
    lines = code.splitlines(keepends=True)
    moved = []
    for i, stmt in enumerate(body):
        if not is_glue(stmt):
            continue
        used = names(stmt) - MODULES - set(dir(builtins))
        later = [s for s in body[i + 1:] if not is_glue(s)]
        if any(used & changed(s) for s in later):
            continue
        moved.append(i)
    if not moved:
        return None
    kept = [s for i, s in enumerate(body) if i not in moved]
    if not kept:
        return None
    if is_glue(body[-1]) and (len(body) - 1) in moved and not shows_nothing(kept[-1]):
        return None
    drop = set()
    for i in moved:
        stmt = body[i]
        start = stmt.lineno - 1
        # comment lines right above it go with it
        while start > 0 and lines[start - 1].strip().startswith("#") and (
                i == 0 or body[i - 1].end_lineno - 1 < start - 1):
            start -= 1
        drop.update(range(start, stmt.end_lineno))
    keep_text = "".join(l for n, l in enumerate(lines) if n not in drop)
    move_text = "".join(l for n, l in enumerate(lines) if n in drop)
    keep_text = keep_text.rstrip("\n") + "\n"
    return keep_text, move_text


def movable(path) -> int:
    """How many glue calls :func:`process` would move out of the chapter's visible cells."""
    return process(path, write=False)


def process(path, write=True):
    text = path.read_text()
    out, pos, count = [], 0, 0
    for m in CELL.finditer(text):
        header, code = split_header(m["body"])
        if re.search(r"remove-(cell|input)|hide-input", header):
            continue
        result = transform(code)
        if result is None:
            continue
        kept, moved = result
        after = text[m.end():]
        nxt = re.match(r"\n*```\{code-cell\} ipython3\n:tags: \[remove-cell\]\n", after)
        out.append(text[pos:m.start()])
        out.append("```{code-cell} ipython3\n" + header + kept + "```\n")
        if nxt:
            out.append(after[:nxt.end()] + moved)
            pos = m.end() + nxt.end()
        else:
            out.append("\n```{code-cell} ipython3\n:tags: [remove-cell]\n" + moved + "```\n")
            pos = m.end()
        count += moved.count("glue(")
    out.append(text[pos:])
    new = "".join(out)
    if write and new != text:
        path.write_text(new)
    return count


if __name__ == "__main__":
    for name in sys.argv[1:]:
        moved = process(Path(name))
        if moved:
            print(f"{name}: {moved} glue calls moved into hidden cells")
