// Run before the second print (tools/build_pdf.py, page.evaluate): writes each entry's page
// number, found in the first print, into the box book-layout.js reserved for it. Takes the
// numbers by the id each entry links to.
(pages) => {
  for (const box of document.querySelectorAll('nav.book-contents .book-contents-page')) {
    box.textContent = String(pages[box.dataset.target]);
  }
}
