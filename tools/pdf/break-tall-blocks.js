// Run in the page laid out for print (tools/build_pdf.py, page.evaluate), before it is printed.
// print.css and the theme keep a code cell, a figure, a proof or an admonition on one page
// (break-inside: avoid). A block taller than the page cannot be: Chromium moves it to a new
// page and breaks it there all the same, leaving the page before it empty, or nearly. Such a
// block, and a block of code more than `codeShare` of a page tall (which would leave as large a
// gap), may break: it gets the class book-breakable (print.css). Blocks shorter stay whole.
// Takes the page's height in CSS pixels of the laid-out page; returns what was released (the
// outermost of nested blocks), one line each.
({pageHeight, codeShare}) => {
  const code = 'div.cell_input, div.highlight, div[class*="highlight-"], div.literal-block-wrapper';
  const tall = [...document.querySelectorAll('article.bd-article *')].filter((el) => {
    if (!getComputedStyle(el).breakInside.startsWith('avoid')) return false;
    const limit = el.matches(code) ? codeShare * pageHeight : pageHeight;
    return el.getBoundingClientRect().height > limit;
  });
  tall.forEach((el) => el.classList.add('book-breakable'));
  return tall.filter((el) => !el.parentElement.closest('.book-breakable')).map((el) => {
    const named = el.closest('[id]');
    return `${el.tagName.toLowerCase()}.${[...el.classList].join('.')} in `
           + `#${named ? named.id : '?'}: ${Math.round(el.getBoundingClientRect().height)} px`;
  });
}
