/* The sidebar toggles a reader sees, made to work (pydata-sphinx-theme issue 2451).
 *
 * pydata-sphinx-theme 0.17 renders a toggle for each sidebar in its top bar, which the book
 * theme hides, and the book theme renders its own above the article: two `.primary-toggle`
 * and two `.secondary-toggle` buttons per page. Both themes wire up only the first of each
 * (`document.querySelector`), the hidden one, so the visible toggles did nothing: on a phone
 * the chapter list and the page's contents could not be opened, and on a desktop the chapter
 * list could not be hidden. Here a click on any later toggle is handed to the first, which
 * runs the themes' own behaviour: the drawer below 992 px, hiding the sidebar above.
 *
 * Remove this file once the pinned themes wire up every toggle. Until then it must stay: the
 * toggle tests of tests/test_site.py fail without it. With both in place a desktop click would
 * hide and show the chapter list at once, and the desktop toggle test would fail.
 */
(function () {
  function handOnClicks(selector) {
    const [wired, ...unwired] = document.querySelectorAll(selector);
    unwired.forEach((toggle) => {
      toggle.addEventListener("click", (event) => {
        // Like the book theme does for the toggle it wires: no tooltip left behind after a
        // tap or a mouse click. A key press (detail 0) keeps the focus, which the drawer
        // gives back to this toggle when it closes.
        if (event.detail > 0) {
          toggle.blur();
        }
        wired.click();
      });
    });
  }

  // The chapter list opened as a drawer showed its top, the current chapter often screens
  // below (chapter 20 at 1,500 px on a phone). Scroll the list, not the page, to show it.
  function showCurrentChapter() {
    const links = [...document.querySelectorAll("nav.bd-docs-nav a.current")];
    const link = links.find((a) => a.getClientRects().length);  // the one in the open drawer
    if (!link) {
      return;
    }
    let box = link.parentElement;
    while (box && !(box.scrollHeight > box.clientHeight + 1
                    && /(auto|scroll)/.test(getComputedStyle(box).overflowY))) {
      box = box.parentElement;
    }
    if (!box || box === document.documentElement || box === document.body) {
      return;
    }
    const offset = link.getBoundingClientRect().top - box.getBoundingClientRect().top;
    if (offset < 0 || offset > box.clientHeight - link.offsetHeight) {
      box.scrollTop += offset - box.clientHeight / 3;
    }
  }

  function setUp() {
    handOnClicks(".primary-toggle");
    handOnClicks(".secondary-toggle");
    document.querySelectorAll(".primary-toggle").forEach((toggle) => {
      // after the themes' own handlers have opened the drawer
      toggle.addEventListener("click", () => requestAnimationFrame(showCurrentChapter));
    });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", setUp);
  } else {
    setUp();
  }
})();
