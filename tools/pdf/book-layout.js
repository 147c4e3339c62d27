// Run first in the single page of every chapter (tools/build_pdf.py, page.evaluate): the page
// nests every chapter inside the introduction's table of contents (one div.toctree-wrapper a
// part of _toc.yml, the part's caption dropped). Lay it out as a book: a title page, a list of
// contents, the introduction, then each part under its title, its chapters one level below (so
// the PDF's outline reads part, chapter, section). Each entry of the contents links to what it
// lists and has a box of fixed width for its page number, holding a 0 until tools/build_pdf.py
// knows the numbers (writing them in then moves nothing, and a box holds text in both prints,
// so that their pages carry the same tags). Takes the parts' captions and the title
// page's lines ({title, author, built, ...}); returns {problem: '' or what does not match,
// contents: [{id, title, level}] (the entries: what each links to, 0 for the
// introduction and the parts, 1 for chapters)}.
({parts, titlePage}) => {
  document.documentElement.dataset.theme = 'light';
  document.documentElement.classList.add('book-pdf');
  const article = document.querySelector('article.bd-article');
  const wrappers = [...article.querySelectorAll('div.toctree-wrapper')];
  const fail = (problem) => ({problem, contents: []});
  if (wrappers.length !== parts.length) {
    return fail(`${wrappers.length} tables of contents on the page, ${parts.length} parts in `
                + '_toc.yml');
  }
  const intro = article.querySelector(':scope > section');
  const introHeading = intro && intro.querySelector(':scope > h1');
  if (!introHeading) return fail('the introduction has no title (h1) at the top of the page');
  const retag = (el, level) => {
    const heading = document.createElement(`h${Math.min(level, 6)}`);
    for (const {name, value} of el.attributes) heading.setAttribute(name, value);
    heading.append(...el.childNodes);
    el.replaceWith(heading);
  };
  const text = (el) => el.textContent.replace(/#$/, '').trim();

  // The title page: no heading, so that the outline starts with the contents.
  const front = document.createElement('section');
  front.className = 'book-title-page';
  for (const [key, line] of Object.entries(titlePage)) {
    if (!line) continue;
    const p = document.createElement('p');
    p.className = `book-title-page-${key}`;
    p.textContent = line;
    front.append(p);
  }

  // The introduction follows the contents; the title page now carries the book's title.
  introHeading.textContent = 'Introduction';

  const contents = document.createElement('nav');
  contents.className = 'book-contents';
  contents.id = 'book-contents';
  contents.setAttribute('aria-labelledby', 'book-contents-title');
  contents.innerHTML = '<h1 id="book-contents-title">Contents</h1><ol></ol>';
  const list = contents.lastChild;
  const listed = [];
  const entry = (id, title, level) => {
    listed.push({id, title, level});
    const item = document.createElement('li');
    item.innerHTML = '<span class="book-contents-entry"><a></a>'
      + '<span class="book-contents-leader" aria-hidden="true"></span>'
      + '<span class="book-contents-page">0</span></span>';
    const link = item.querySelector('a');
    link.href = `#${id}`;
    link.textContent = title;
    item.querySelector('.book-contents-page').dataset.target = id;
    return item;
  };
  list.append(entry(intro.id, 'Introduction', 0));
  article.prepend(front, contents);

  wrappers.forEach((wrapper, index) => {
    const part = document.createElement('section');
    part.className = 'book-part';
    part.id = `book-part-${index + 1}`;
    const title = document.createElement('h1');
    title.textContent = parts[index];
    part.append(title);
    const item = entry(part.id, parts[index], 0);
    const chapters = document.createElement('ol');
    item.append(chapters);
    list.append(item);
    for (const chapter of wrapper.querySelectorAll(':scope > section')) {
      const depth = (el) => Number(el.tagName[1]);
      const top = depth(chapter.querySelector('h1, h2, h3, h4, h5, h6'));
      for (const h of [...chapter.querySelectorAll('h1, h2, h3, h4, h5, h6')]) {
        retag(h, depth(h) - top + 2);
      }
      chapters.append(entry(chapter.id, text(chapter.querySelector('h2')), 1));
      part.append(chapter);
    }
    article.append(part);
    wrapper.remove();
  });
  return {problem: '', contents: listed};
}
