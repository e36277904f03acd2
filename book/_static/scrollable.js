/*
 * Every region that scrolls sideways can be reached from the keyboard.
 *
 * A wide code line, output, table, display equation or (on a phone) inline formula
 * scrolls inside its box. Keyboard users scroll such a box with the arrow keys once it has
 * focus, so each one gets tabindex="0" (axe-core: scrollable-region-focusable). The theme
 * does this for the boxes visible when the page loads; boxes inside a solution become
 * scrollable only when the solution is opened, and equations only once MathJax has
 * typeset them, so a ResizeObserver watches every candidate and marks it whenever it
 * overflows.
 *
 * Plain ES2017, no dependencies, no network.
 */
(function () {
  "use strict";

  const CANDIDATES = "pre, .pst-scrollable-table-container, .cell_output .output, div.math, mjx-container[display='true'], span.math";

  // An inline formula's box (the theme's span.math, no wider than its line, clipping
  // what is wider) overflows when the formula it holds is wider: on a phone a long one
  // does. Its scrollWidth says nothing here (MathJax's hidden MathML for screen readers
  // is counted in it), so the formula's own width is compared.
  function overflows(el) {
    if (el.matches("span.math")) {
      const formula = el.querySelector("mjx-container");
      return !!formula && formula.getBoundingClientRect().width > el.clientWidth + 1;
    }
    return el.scrollWidth > el.clientWidth + 1;
  }

  function mark(el) {
    if (overflows(el) && el.clientWidth > 0) {
      // The theme gives code blocks tabindex="-1" (it focuses them itself); a box the
      // reader must scroll needs a place in the tab order.
      if (!(el.tabIndex >= 0 && el.hasAttribute("tabindex"))) el.setAttribute("tabindex", "0");
      el.classList.add("scrolls-sideways");
    }
  }

  function watch(root) {
    if (typeof ResizeObserver === "undefined") return;
    const observer = new ResizeObserver((entries) => entries.forEach((e) => mark(e.target)));
    root.querySelectorAll(CANDIDATES).forEach((el) => observer.observe(el));
  }

  function start() {
    const article = document.querySelector(".bd-article") || document.body;
    watch(article);
    const mj = window.MathJax;
    if (mj && mj.startup && mj.startup.promise) {
      mj.startup.promise.then(() => watch(article)); // equations exist only once typeset
    }
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
