/* Figures a reader can enlarge where the column shrinks them below legibility.

   The chapters' figures are drawn for a desktop column: about 6.7 in wide at 100 dpi, their
   smallest text 10 pt (13.9 px at the drawn size; scratchformer.book.plotting). A phone's
   column shows them at about half that size, their text at 7 px. Where a figure's text would be
   shown below LEGIBLE_PX, a button under it says "Tap to enlarge", and a tap on the figure or
   the button opens it in an overlay (a modal <dialog>) at a scale that sets its text at
   ENLARGED_PX or more (the drawn size where the screen is wide enough), which pans sideways.
   The overlay closes with its Close button, a tap beside the figure, or Escape, and gives focus
   back to what opened it. Where the figure is legible in the column, nothing changes: no
   button, and a click on the figure opens the image file as before. */
"use strict";

(function () {
  const FIGURE_TEXT_PX = 10 * 100 / 72;  // 10 pt at 100 dpi, at the figure's drawn size
  const LEGIBLE_PX = 9;
  const ENLARGED_PX = 11;
  const figures = [];
  let dialog = null;
  let opener = null;

  function drawnWidth(img) {
    // The figure's 1x width: its inline CSS width (the PNGs are pixel-doubled).
    const match = /width:\s*([\d.]+)px/.exec(img.getAttribute("style") || "");
    return match ? parseFloat(match[1]) : img.naturalWidth / 2;
  }

  function textPx(img) {
    const drawn = drawnWidth(img);
    return drawn > 0 ? FIGURE_TEXT_PX * img.getBoundingClientRect().width / drawn : Infinity;
  }

  function shrunk(img) {
    return textPx(img) < LEGIBLE_PX;
  }

  function label(figure) {
    const number = figure.querySelector(".caption-number");
    return number ? number.textContent.trim() : "the figure";
  }

  function build() {
    dialog = document.createElement("dialog");
    dialog.className = "figure-zoom";
    dialog.innerHTML =
      '<div class="figure-zoom-bar"><span class="figure-zoom-title"></span>' +
      '<button type="button" class="figure-zoom-close">Close</button></div>' +
      '<div class="figure-zoom-pane" tabindex="0" role="region"><img alt=""></div>';
    document.body.append(dialog);
    dialog.querySelector(".figure-zoom-close").addEventListener("click", close);
    // A tap beside the figure (on the backdrop or the pane around the image) closes it.
    dialog.addEventListener("click", (event) => {
      if (event.target === dialog || event.target.classList.contains("figure-zoom-pane")) {
        close();
      }
    });
    // Escape closes a modal dialog by itself; focus goes back to the opener either way.
    dialog.addEventListener("close", () => {
      document.documentElement.classList.remove("figure-zoom-open");
      if (opener && opener.isConnected) opener.focus({preventScroll: true});
      opener = null;
    });
  }

  function open(img, from) {
    if (!dialog) build();
    const figure = img.closest("figure");
    const name = label(figure);
    const drawn = drawnWidth(img);
    const room = document.documentElement.clientWidth - 16;
    // The drawn size where the screen has room for it, else as wide as the screen allows, but
    // never below the scale that sets the smallest text at ENLARGED_PX (then it pans).
    const scale = Math.max(Math.min(1, room / drawn), ENLARGED_PX / FIGURE_TEXT_PX);
    const big = dialog.querySelector(".figure-zoom-pane img");
    big.src = img.currentSrc || img.src;
    big.alt = img.alt;
    big.style.width = `${Math.round(drawn * scale)}px`;
    big.dataset.scale = scale.toFixed(3);
    dialog.querySelector(".figure-zoom-title").textContent = `${name}, enlarged`;
    dialog.setAttribute("aria-label", `${name}, enlarged`);
    dialog.querySelector(".figure-zoom-pane").setAttribute(
      "aria-label", `${name}: scroll to see all of it`);
    dialog.querySelector(".figure-zoom-close").setAttribute(
      "aria-label", `Close ${name}, enlarged`);
    opener = from;
    document.documentElement.classList.add("figure-zoom-open");
    dialog.showModal();
    dialog.querySelector(".figure-zoom-pane").scrollTo(0, 0);
    dialog.querySelector(".figure-zoom-close").focus();
  }

  function close() {
    if (dialog && dialog.open) dialog.close();
  }

  function mark() {
    for (const {img, cue} of figures) {
      const small = shrunk(img);
      cue.hidden = !small;
      img.closest("figure").classList.toggle("figure-zoomable", small);
    }
  }

  function setUp() {
    for (const img of document.querySelectorAll("article figure img")) {
      const figure = img.closest("figure");
      const caption = figure.querySelector("figcaption");
      const cue = document.createElement("button");
      cue.type = "button";
      cue.className = "figure-zoom-cue";
      cue.textContent = "Tap to enlarge";
      cue.setAttribute("aria-label", `Tap to enlarge ${label(figure)}`);
      cue.hidden = true;
      cue.addEventListener("click", () => open(img, cue));
      (caption || figure).append(cue);
      const link = img.closest("a");
      (link || img).addEventListener("click", (event) => {
        if (!shrunk(img)) return;  // legible: the link opens the image file, as before
        event.preventDefault();
        open(img, link || cue);
      });
      figures.push({img, cue});
      if (!img.complete) img.addEventListener("load", mark);
    }
    mark();
    window.addEventListener("resize", mark);
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", setUp);
  } else {
    setUp();
  }
})();
