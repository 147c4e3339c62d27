// Run in the page laid out for print (tools/build_pdf.py, page.evaluate). Shrinks each too-wide
// display equation to fit (MathJax's CHTML output is sized in em), down to `smallest` of its
// size, then lists what still overflows its box or the page.
(smallest) => {
  const scaled = [];
  for (const eq of document.querySelectorAll('mjx-container[display="true"]')) {
    const eqno = eq.parentElement.querySelector(':scope > span.eqno');
    const box = eq.parentElement.clientWidth - (eqno ? 2 * eqno.offsetWidth + 8 : 0);
    const wide = eq.firstElementChild ? eq.firstElementChild.getBoundingClientRect().width : 0;
    if (wide > box && box > 0) {
      const factor = Math.max(smallest, Math.floor(box / wide * 100 - 1) / 100);
      const size = parseFloat(getComputedStyle(eq).fontSize);
      eq.style.fontSize = `${(size * factor).toFixed(2)}px`;
      const named = eq.closest('[id]');
      scaled.push({id: named ? named.id : '', factor});
    }
  }
  const article = document.querySelector('article.bd-article') || document.body;
  const left = article.getBoundingClientRect().left - 1;
  const limit = article.getBoundingClientRect().right + 1;
  const selectors = 'mjx-container[display="true"], pre, table, img, figure, div.math';
  const cut = [...article.querySelectorAll(selectors)].filter((el) => {
    const r = el.getBoundingClientRect();
    const math = el.matches('mjx-container') && el.firstElementChild
      ? el.firstElementChild.getBoundingClientRect() : null;
    const inner = math ? math.right : r.left + el.scrollWidth;
    const scrolls = !el.matches('img, figure') && el.scrollWidth > el.clientWidth + 1;
    return r.width > 0 && (inner > limit || r.right > limit || r.left < left
                           || (math && math.left < left) || scrolls);
  });
  const outermost = cut.filter((el) => !cut.some((other) => other !== el && other.contains(el)));
  return {scaled, cut: outermost.map((el) => {
    const named = el.closest('[id]');
    return `${el.tagName.toLowerCase()} in #${named ? named.id : '?'}: ` +
           (el.textContent || el.getAttribute('src') || '').trim().slice(0, 60);
  })};
}
