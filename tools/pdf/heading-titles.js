// Run in the page laid out for print (tools/build_pdf.py, page.evaluate): the title of every
// heading printed, in the order of the page, which is the order of the PDF's outline. Chromium
// writes the outline's titles from the printed lines and drops the space where a heading
// wraps; tools/build_pdf.py writes these in their place.
() => [...document.querySelectorAll('h1, h2, h3, h4, h5, h6')]
  .filter((heading) => heading.checkVisibility())
  .map((heading) => {
    const copy = heading.cloneNode(true);
    copy.querySelectorAll('.headerlink').forEach((link) => link.remove());
    return copy.textContent.replace(/\s+/g, ' ').trim();
  })
