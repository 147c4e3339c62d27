/* A click anywhere on a dropdown's title bar opens or closes the dropdown.
 *
 * sphinx-togglebutton 0.4.5 makes a dropdown admonition's whole title clickable, but its
 * handler (togglebutton.js, toggleClickHandler) finds the dropdown's button only when the
 * click lands on the title itself, the button or the button's icon. Every solution's title
 * holds a link to its exercise ("Solution to Exercise 3.1 (...)"), the largest part of the
 * bar: a click there followed the link (the page scrolled away), left the solution closed,
 * and threw "ReferenceError: button is not defined"; a click on a formula in a title did the
 * same without the link. Here, before the page sees it, such a click is turned into a click on
 * the dropdown's own button, which runs togglebutton's behaviour. The exercise the solution
 * answers is the box just above it.
 *
 * Remove this file once the pinned sphinx-togglebutton handles clicks on a title's children;
 * tests/test_site.py clicks and taps the link in a solution's title.
 */
(function () {
  document.addEventListener("click", (event) => {
    const title = event.target.closest(".admonition.toggle > .admonition-title");
    if (!title || event.target === title || event.target.closest(".toggle-button")) {
      return;  // togglebutton handles clicks on the title itself and on its button
    }
    const button = title.querySelector(".toggle-button");
    if (!button) {
      return;
    }
    event.preventDefault();  // not the link's jump
    event.stopPropagation();  // nor togglebutton's handler, which would throw
    button.click();
  }, true);  // capturing: before the title's own listeners
})();
