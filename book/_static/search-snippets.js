/* Search that lands where the words are. Sphinx's searchtools.js lists the pages found and
   quotes each one around the words; sphinx_highlight.js marks the words on the page opened.
   Here:

   - The quote comes from the article. Sphinx reads the page's whole `[role=main]`, which in
     the book theme starts with a print-only copy of the page's contents list: a word of a
     section title was quoted from there ("...Contents 3.1. The variance of a dot product
     3.2. ..."). The quote is taken where most of the words stand together, earliest first.
   - Its formulas are plain text. The fetched HTML is not typeset yet, so every formula of a
     quote showed as TeX ("\(\sqrt{d_k}\)"); each is written as close to the typeset formula
     as plain text gets ("√d_k" becomes "√dk").
   - The result links to the section of the quote (`page.html#section`), not the page's top.
   - The opened page marks the words in its article and scrolls the first one into view, in
     the linked section. sphinx_highlight.js would mark them (over the whole page, contents
     and navigation included) only where Sphinx's search is not loaded, and
     pydata-sphinx-theme loads it on every page for its search dialog, so nothing was marked.
     As in Sphinx, the words travel in localStorage ("sphinx_highlight_terms"; a link with
     `?highlight=words` works too), but only when a result is opened: Sphinx stored them at
     every search, for whatever page was loaded next. Escape, or "Hide search matches", takes
     the marks away (Sphinx's own SphinxHighlight.hideSearchWords).

   Sphinx's searchtools.js defines Search, on every page of this theme. */
"use strict";

const TEX_SYMBOLS = {
  alpha: "α", beta: "β", gamma: "γ", delta: "δ", epsilon: "ε", varepsilon: "ε", eta: "η",
  theta: "θ", lambda: "λ", mu: "μ", pi: "π", sigma: "σ", tau: "τ", phi: "φ", omega: "ω",
  Delta: "Δ", Sigma: "Σ", Omega: "Ω", ell: "ℓ", sum: "∑", prod: "∏", infty: "∞",
  top: "⊤", cdot: "·", cdots: "⋯", ldots: "…", dots: "…", times: "×", odot: "⊙", le: "≤",
  leq: "≤", ge: "≥", geq: "≥", ne: "≠", neq: "≠", approx: "≈", in: "∈", to: "→",
  leftarrow: "←", rightarrow: "→", partial: "∂", nabla: "∇", sqrt: "√", lVert: "‖",
  rVert: "‖", Vert: "‖", langle: "⟨", rangle: "⟩", mid: "|", pm: "±", propto: "∝",
  max: "max", min: "min", log: "log", exp: "exp", sin: "sin", cos: "cos", tanh: "tanh",
};

function texToText(tex) {
  return tex
    .replace(/\\[()[\]]/g, " ")
    .replace(/\\(?:begin|end)\{[a-z*]+\}/g, " ")
    .replace(/\\frac\{([^{}]*)\}\{([^{}]*)\}/g, "($1)/($2)")
    .replace(/\\([A-Za-z]+)/g, (whole, name) => TEX_SYMBOLS[name] ?? "")
    .replace(/\\\\|&/g, " ")
    .replace(/\\[,;:!> ]/g, " ")
    .replace(/[{}^_$]/g, "")
    .replace(/\s+/g, " ")
    .trim();
}

(function () {
  if (typeof Search === "undefined") {
    return;
  }
  const TERMS_KEY = "sphinx_highlight_terms";  // sphinx_highlight.js reads the same key
  const CONTEXT = 120;  // characters quoted on each side of the words, as Sphinx quotes
  const WORD = "[\\p{L}\\p{N}_]";
  const HEADING = ":scope > h1, :scope > h2, :scope > h3, :scope > h4, :scope > h5, :scope > h6";

  // -- The search page: quotes, and links to the section quoted

  /* A fetched page's article, formulas as text and permalinks ("#") dropped; within the
     section `anchor` names, when a result names one (a section title found). */
  function article(htmlString, anchor) {
    const page = new DOMParser().parseFromString(htmlString, "text/html");
    page.querySelectorAll(".headerlink, script, style").forEach((el) => el.remove());
    page.querySelectorAll(".math").forEach((formula) => {
      // The formula's own text, not its equation number (span.eqno) or the number's link.
      const walker = page.createTreeWalker(formula, NodeFilter.SHOW_TEXT);
      for (let node = walker.nextNode(); node; node = walker.nextNode()) {
        if (!node.parentElement.closest(".eqno")) node.nodeValue = texToText(node.nodeValue) + " ";
      }
    });
    const body = page.querySelector("article.bd-article") || page.querySelector("[role=main]");
    const section = anchor && page.getElementById(decodeURIComponent(anchor.slice(1)));
    return section && body && body.contains(section) ? section : body;
  }

  /* Where to quote: the occurrence with the most distinct words within the quote's reach,
     a word's start before a word's middle, the earliest of equals. -1 if none occurs. */
  function bestPlace(textLower, words) {
    const letter = new RegExp(WORD, "u");
    const hits = [];
    words.forEach((word, i) => {
      for (let at = textLower.indexOf(word); at > -1; at = textLower.indexOf(word, at + 1)) {
        hits.push({at, i, start: at === 0 || !letter.test(textLower[at - 1])});
      }
    });
    hits.sort((a, b) => a.at - b.at);
    // A window of the hits within reach of each one, and how often each word is in it.
    const inReach = new Map();
    const enter = (hit) => inReach.set(hit.i, (inReach.get(hit.i) ?? 0) + 1);
    const leave = (hit) => (inReach.get(hit.i) === 1 ? inReach.delete(hit.i)
      : inReach.set(hit.i, inReach.get(hit.i) - 1));
    let [low, high, best, bestScore] = [0, 0, -1, -1];
    hits.forEach((hit) => {
      while (high < hits.length && hits[high].at <= hit.at + CONTEXT) enter(hits[high++]);
      while (hits[low].at < hit.at - CONTEXT) leave(hits[low++]);
      const score = 2 * inReach.size + (hit.start ? 1 : 0);
      if (score > bestScore) [best, bestScore] = [hit.at, score];
    });
    return best;
  }

  /* The innermost titled section around character `offset` of `root`'s text (the theorem
     boxes' inner sections carry ids too, the same on every box, and no title). */
  function sectionAt(root, offset) {
    const walker = root.ownerDocument.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    let seen = 0;
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      seen += node.nodeValue.length;
      if (seen > offset) {
        let section = node.parentElement.closest("section[id]");
        while (section && !section.querySelector(HEADING)) {
          section = section.parentElement.closest("section[id]");
        }
        return section;
      }
    }
    return null;
  }

  Search.htmlToText = (htmlString, anchor) => article(htmlString, anchor)?.textContent ?? "";

  let searchedFor = "";  // the words of the query as the page marks them

  /* Always a paragraph (Sphinx appends what this returns): where no word is found as written
     (a stem such as "happi"; the query's own words are tried next), the article's start. */
  Search.makeSearchSummary = (htmlString, keywords, anchor) => {
    const root = article(htmlString, anchor);
    const text = root ? root.textContent : "";
    const lower = text.toLowerCase();
    const stems = [...keywords].map((k) => k.toLowerCase()).filter((k) => k);
    let place = bestPlace(lower, stems);
    if (place < 0) place = bestPlace(lower, searchedFor.split(" ").filter((w) => w));
    const start = Math.max(place - CONTEXT, 0);
    const summary = document.createElement("p");
    summary.classList.add("context");
    summary.textContent = (start > 0 ? "..." : "") + text.substr(start, 2 * CONTEXT).trim()
      + (start + 2 * CONTEXT < text.length ? "..." : "");
    const section = place < 0 ? null : sectionAt(root, place);
    if (section) summary.dataset.section = section.id;
    return summary;
  };

  const parseQuery = Search._parseQuery;
  Search._parseQuery = (query) => {
    const parsed = parseQuery(query);
    searchedFor = [...parsed[3]].join(" ");  // [query, searchTerms, excluded, highlightTerms, ...]
    localStorage.removeItem(TERMS_KEY);  // given to the result opened, not to any next page
    return parsed;
  };

  function onSearchPage(results) {
    // A result's quote arrives after its link: the link then goes to the quoted section.
    new MutationObserver((records) => records.forEach((record) => record.addedNodes.forEach(
      (node) => {
        if (!(node instanceof HTMLElement) || !node.matches("p.context[data-section]")) return;
        const link = node.parentElement.querySelector(":scope > a");
        if (link && !new URL(link.href).hash) {
          link.setAttribute("href", `${link.getAttribute("href")}#${node.dataset.section}`);
        }
      }))).observe(results, {childList: true, subtree: true});
    const keep = (event) => {
      if (event.target.closest("#search-results li > a") && searchedFor) {
        localStorage.setItem(TERMS_KEY, searchedFor);
      }
    };
    results.addEventListener("click", keep);
    results.addEventListener("auxclick", keep);  // opened in a new tab
  }

  // -- A page opened from a result: the words marked in the article, the first one shown

  function mark(root, pattern) {
    const marks = [];
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT, {
      acceptNode: (node) => node.parentElement.closest(
        ".math, mjx-container, script, style, svg, button, textarea, .headerlink, .highlighted")
        ? NodeFilter.FILTER_REJECT : NodeFilter.FILTER_ACCEPT,
    });
    const nodes = [];
    for (let node = walker.nextNode(); node; node = walker.nextNode()) nodes.push(node);
    nodes.forEach((node) => {
      const text = node.nodeValue;
      const pieces = [];
      let last = 0;
      for (const found of text.matchAll(pattern)) {
        pieces.push(document.createTextNode(text.slice(last, found.index)));
        const span = document.createElement("span");
        span.className = "highlighted";
        span.textContent = found[0];
        pieces.push(span);
        marks.push(span);
        last = found.index + found[0].length;
      }
      if (!pieces.length) return;
      pieces.push(document.createTextNode(text.slice(last)));
      node.replaceWith(...pieces);
    });
    return marks;
  }

  /* A word of the query, or a word of the page with the same stem (the search found the page
     by stems: "variances" finds "variance"); a word of one or two letters only whole. */
  function wordsPattern(words) {
    const stemmer = typeof Stemmer === "function" ? new Stemmer() : null;
    const escape = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
    const alternatives = words.map((word) => {
      const forms = new Set([word, stemmer ? stemmer.stemWord(word) : word]);
      const any = [...forms].filter((f) => f).map(escape).join("|");
      return word.length < 3 ? `(?<!${WORD})(?:${any})(?!${WORD})` : `${WORD}*(?:${any})${WORD}*`;
    });
    return new RegExp(alternatives.join("|"), "giu");
  }

  function hideLink() {
    const box = document.getElementById("searchbox");
    if (!box || typeof SphinxHighlight === "undefined") return;
    const line = document.createElement("p");
    line.className = "highlight-link";
    const button = document.createElement("a");
    button.href = "#";
    button.setAttribute("role", "button");
    button.textContent = "Hide search matches";
    button.addEventListener("click", (event) => {
      event.preventDefault();
      SphinxHighlight.hideSearchWords();  // unmarks the words, removes this line
    });
    line.append(button);
    box.append(line);
  }

  function show(marks) {
    const target = location.hash && document.getElementById(decodeURIComponent(location.hash.slice(1)));
    const seen = (el) => el.getClientRects().length > 0;
    let first = marks.find((m) => target && target.contains(m) && seen(m)) || marks.find(seen);
    if (!first) {  // every match folded away (a hidden cell's code): unfold the first
      first = marks[0];
      for (let box = first.closest("details"); box; box = box.parentElement.closest("details")) {
        box.open = true;
      }
    }
    first.scrollIntoView({block: "center"});
  }

  function onArrival() {
    const url = new URL(location.href);
    const words = (localStorage.getItem(TERMS_KEY) || url.searchParams.get("highlight") || "")
      .toLowerCase().split(/\s+/).filter((w) => w);
    localStorage.removeItem(TERMS_KEY);
    if (url.searchParams.has("highlight")) {
      url.searchParams.delete("highlight");
      history.replaceState(history.state, "", url);
    }
    const root = document.querySelector("article.bd-article");
    if (!words.length || !root) return;
    const marks = mark(root, wordsPattern(words));
    if (!marks.length) return;
    hideLink();
    // Scroll once the page has its final height: loaded, and its formulas typeset.
    const loaded = document.readyState === "complete" ? Promise.resolve()
      : new Promise((resolve) => window.addEventListener("load", resolve, {once: true}));
    const typeset = window.MathJax?.startup?.promise ?? Promise.resolve();
    Promise.all([loaded, typeset]).then(() => requestAnimationFrame(() => show(marks)));
  }

  const results = document.getElementById("search-results");
  if (results) {
    onSearchPage(results);
  } else {
    onArrival();
  }
})();
