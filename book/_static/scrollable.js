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
 * A box that scrolls also shows that it does: while more of it lies to the right (or
 * left) of what is in view, that edge fades out (classes cut-right and cut-left, drawn by
 * accessibility.css). On a phone, where scrollbars stay hidden until one scrolls, an
 * equation cut at the edge of the screen otherwise looked complete ("X_{l+1} =").
 *
 * MathJax typesets a formula only when it comes near the screen (ui/lazy, _config.yml),
 * so formulas keep appearing as the reader scrolls: a MutationObserver watches each new
 * one too.
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
  function contentWidth(el) {
    if (el.matches("span.math")) {
      const formula = el.querySelector("mjx-container");
      return formula ? formula.getBoundingClientRect().width : 0;
    }
    return el.scrollWidth;
  }

  function overflows(el) {
    return contentWidth(el) > el.clientWidth + 1;
  }

  // Which edges cut the content off: those that fade (accessibility.css).
  function showEdges(el) {
    const left = el.scrollLeft > 1;
    const right = el.scrollLeft + el.clientWidth < contentWidth(el) - 1;
    el.classList.toggle("cut-left", left);
    el.classList.toggle("cut-right", right);
  }

  function mark(el) {
    if (overflows(el) && el.clientWidth > 0) {
      // The theme gives code blocks tabindex="-1" (it focuses them itself); a box the
      // reader must scroll needs a place in the tab order.
      if (!(el.tabIndex >= 0 && el.hasAttribute("tabindex"))) el.setAttribute("tabindex", "0");
      if (!el.classList.contains("scrolls-sideways")) {
        el.classList.add("scrolls-sideways");
        el.addEventListener("scroll", () => showEdges(el), { passive: true });
      }
    }
    if (el.classList.contains("scrolls-sideways")) showEdges(el);
  }

  function watch(root) {
    if (typeof ResizeObserver === "undefined") return;
    const observer = new ResizeObserver((entries) => entries.forEach((e) => mark(e.target)));
    const seen = new WeakSet();
    const observe = (el) => {
      if (!seen.has(el)) {
        seen.add(el);
        observer.observe(el);
      }
    };
    root.querySelectorAll(CANDIDATES).forEach(observe);
    if (typeof MutationObserver === "undefined") return;
    new MutationObserver((records) => {
      for (const record of records) {
        for (const node of record.addedNodes) {
          if (node.nodeType !== Node.ELEMENT_NODE) continue;
          if (node.matches(CANDIDATES)) observe(node);
          node.querySelectorAll(CANDIDATES).forEach(observe);
          const box = node.closest("span.math, div.math");
          if (box) observe(box);
        }
      }
    }).observe(root, { childList: true, subtree: true });
  }

  function start() {
    watch(document.querySelector(".bd-article") || document.body);
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
