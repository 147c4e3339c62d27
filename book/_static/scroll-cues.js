/* Marks each table box that scrolls sideways with the sides where more of the table lies
   (classes more-left and more-right, which book.css turns into a fade), again when the reader
   scrolls it or the window changes size. */
"use strict";

(function () {
  function mark(box) {
    const hidden = box.scrollWidth - box.clientWidth;
    box.classList.toggle("more-left", hidden > 1 && box.scrollLeft > 1);
    box.classList.toggle("more-right", hidden > 1 && box.scrollLeft < hidden - 1);
  }

  function setUp() {
    const boxes = [...document.querySelectorAll("div.pst-scrollable-table-container")];
    boxes.forEach((box) => {
      mark(box);
      box.addEventListener("scroll", () => mark(box), {passive: true});
    });
    window.addEventListener("resize", () => boxes.forEach(mark));
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", setUp);
  } else {
    setUp();
  }
})();
