/*
 * The table of contents in the left sidebar starts at its top, title in view, whenever
 * the current chapter's entry is in view there.
 *
 * The theme (pydata-sphinx-theme 0.17) scrolls the sidebar on load so that the current
 * entry sits a quarter of the way down, whenever that entry is in the lower half of the
 * window, even when the whole list fits: at 1366x900 the sidebar of chapters 7 to 9
 * scrolled itself 66 to 123 px and cut the book's title. After the theme's own handler
 * (its deferred script runs before DOMContentLoaded), the sidebar goes back to its top if
 * the current entry is then still wholly in view; a longer list keeps the theme's scroll.
 *
 * Plain ES2017, no dependencies, no network.
 */
(function () {
  "use strict";

  function toTop() {
    const sidebar = document.querySelector("div.bd-sidebar");
    if (!sidebar || sidebar.scrollTop === 0) return;
    const active = [...document.querySelectorAll(".bd-docs-nav .active")].pop();
    const box = sidebar.getBoundingClientRect();
    if (active) {
      const entry = active.getBoundingClientRect();
      if (entry.bottom + sidebar.scrollTop > box.top + sidebar.clientHeight) return;
    }
    sidebar.scrollTop = 0;
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", toTop);
  } else {
    toTop();
  }
})();
