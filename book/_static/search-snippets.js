/* Search results quote the page around the words found, from the page's HTML before MathJax
   has typeset it, so every formula of a snippet showed as TeX ("\(\sqrt{d_k}\)"). Here each
   formula is written as plain text first ("√d_k" becomes "√dk"), as close to the typeset
   formula as plain text gets. Sphinx's searchtools.js defines Search; other pages lack it. */
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

if (typeof Search !== "undefined" && Search.htmlToText) {
  const htmlToText = Search.htmlToText;
  Search.htmlToText = (htmlString, anchor) => {
    const page = new DOMParser().parseFromString(htmlString, "text/html");
    page.querySelectorAll(".math").forEach((formula) => {
      // The formula's own text, not its equation number (span.eqno) or the number's link.
      const walker = page.createTreeWalker(formula, NodeFilter.SHOW_TEXT);
      for (let node = walker.nextNode(); node; node = walker.nextNode()) {
        if (!node.parentElement.closest(".eqno")) node.nodeValue = texToText(node.nodeValue) + " ";
      }
    });
    return htmlToText(page.documentElement.outerHTML, anchor);
  };
}
