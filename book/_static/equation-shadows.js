/* The scroll shadows of wide display equations (book.css) are covered, where the formula ends,
   by the colour behind the equation. Theorem and proof boxes have tints of their own, which CSS
   cannot read; this gives each equation the background it actually sits on, again whenever
   the reader switches between light and dark. */
"use strict";

function backgroundBehind(element) {
  // The colours from the element up to the first opaque one, laid over each other.
  const layers = [];
  for (let node = element; node; node = node.parentElement) {
    const [r, g, b, a = 1] = (getComputedStyle(node).backgroundColor.match(/[\d.]+/g) || [])
      .map(Number);
    if (a > 0) layers.push([r, g, b, a]);
    if (a >= 1) break;
  }
  if (!layers.length) return null;
  let [r, g, b] = layers.pop().slice(0, 3);
  for (const [lr, lg, lb, la] of layers.reverse()) {
    [r, g, b] = [r + (lr - r) * la, g + (lg - g) * la, b + (lb - b) * la];
  }
  return `rgb(${Math.round(r)}, ${Math.round(g)}, ${Math.round(b)})`;
}

function coverEquations() {
  document.querySelectorAll("div.math").forEach((equation) => {
    const colour = backgroundBehind(equation.parentElement);
    if (colour) equation.style.setProperty("--equation-cover", colour);
  });
}

coverEquations();
new MutationObserver(coverEquations).observe(document.documentElement,
  {attributes: true, attributeFilter: ["data-theme"]});
