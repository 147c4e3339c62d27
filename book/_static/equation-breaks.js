/* MathJax 4 breaks a display equation wider than its column over lines when it typesets the
   page (book/_ext/offline_mathjax.py), at the column's width then. When that width changes (a
   phone turned, a window resized, the page laid out for print) the equations are typeset again
   for the new width. The width they were last typeset for is kept in the root element's
   data-equations-width (the browser tests wait for it). */
"use strict";

(function () {
  let width = null;
  let timer = null;

  function columnWidth(article) {
    return Math.round(article.getBoundingClientRect().width);
  }

  function rebreak(article) {
    const now = columnWidth(article);
    if (now === width) return;
    width = now;
    // From the METRICS state: the width is measured again (a plain rerender reuses it).
    const state = MathJax._ && MathJax._.core && MathJax._.core.MathItem
      && MathJax._.core.MathItem.STATE;
    MathJax.startup.document.rerenderPromise(state ? state.METRICS : 110).then(() => {
      if (width === now) document.documentElement.dataset.equationsWidth = String(now);
    }).catch((error) => console.warn(error));
  }

  function setUp() {
    const article = document.querySelector("article");
    if (!article || !window.MathJax || !MathJax.startup || !MathJax.startup.promise) return;
    MathJax.startup.promise.then(() => {
      width = columnWidth(article);
      document.documentElement.dataset.equationsWidth = String(width);
      new ResizeObserver(() => {
        clearTimeout(timer);
        timer = setTimeout(() => rebreak(article), 200);
      }).observe(article);
    });
  }

  // MathJax's script is deferred too, and runs after this one: wait for the document.
  if (document.readyState === "complete") {
    setUp();
  } else {
    window.addEventListener("load", setUp);
  }
})();
