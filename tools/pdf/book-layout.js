// Run first in the single page of every chapter (tools/build_pdf.py, page.evaluate): the page
// nests every chapter inside the introduction's table of contents (one div.toctree-wrapper a
// part of _toc.yml, the part's caption dropped). Lay it out as a book: the introduction, then
// each part under its title, its chapters one level below (so the PDF's outline reads part,
// chapter, section), and a list of contents, linked, where the introduction showed its table of
// contents. Takes the parts' captions; returns '' or what does not match.
(parts) => {
  document.documentElement.dataset.theme = 'light';
  document.documentElement.classList.add('book-pdf');
  const article = document.querySelector('article.bd-article');
  const wrappers = [...article.querySelectorAll('div.toctree-wrapper')];
  if (wrappers.length !== parts.length) {
    return `${wrappers.length} tables of contents on the page, ${parts.length} parts in _toc.yml`;
  }
  const retag = (el, level) => {
    const heading = document.createElement(`h${Math.min(level, 6)}`);
    for (const {name, value} of el.attributes) heading.setAttribute(name, value);
    heading.append(...el.childNodes);
    el.replaceWith(heading);
  };
  const contents = document.createElement('nav');
  contents.className = 'book-contents';
  const list = document.createElement('ol');
  contents.append(list);
  wrappers[0].before(contents);
  wrappers.forEach((wrapper, index) => {
    const part = document.createElement('section');
    part.className = 'book-part';
    part.id = `book-part-${index + 1}`;
    const title = document.createElement('h1');
    title.textContent = parts[index];
    part.append(title);
    const entry = document.createElement('li');
    entry.innerHTML = `<a href="#${part.id}"></a><ol></ol>`;
    entry.firstChild.textContent = parts[index];
    list.append(entry);
    for (const chapter of wrapper.querySelectorAll(':scope > section')) {
      const depth = (el) => Number(el.tagName[1]);
      const top = depth(chapter.querySelector('h1, h2, h3, h4, h5, h6'));
      for (const h of [...chapter.querySelectorAll('h1, h2, h3, h4, h5, h6')]) {
        retag(h, depth(h) - top + 2);
      }
      const heading = chapter.querySelector('h2');
      const item = document.createElement('li');
      item.innerHTML = `<a href="#${chapter.id}"></a>`;
      item.firstChild.textContent = heading.textContent.replace(/#$/, '');
      entry.lastChild.append(item);
      part.append(chapter);
    }
    article.append(part);
    wrapper.remove();
  });
  return '';
}
