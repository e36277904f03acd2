/*
 * A full stop, comma or closing bracket right after an inline formula stays on the
 * formula's line.
 *
 * MathJax draws each inline formula as a box, and browsers may break a line between a
 * box and the text after it: a long formula at the end of a line then leaves its full
 * stop alone at the start of the next one. Each inline formula followed by punctuation
 * is wrapped with that punctuation in one span.math-and-punctuation, which fit.css keeps
 * unbroken. The text itself is unchanged. This is done when the page is read, before
 * MathJax typesets anything (it typesets a formula when it comes near the screen, see
 * _config.yml): the wrapper does not change what MathJax finds in span.math.
 *
 * Plain ES2017, no dependencies, no network.
 */
(function () {
  "use strict";

  const PUNCTUATION = /^[.,;:!?)\]\u2019\u201d]+/;

  function glue(root) {
    root.querySelectorAll("span.math").forEach((math) => {
      const next = math.nextSibling;
      if (!next || next.nodeType !== Node.TEXT_NODE) return;
      if (math.parentNode.classList.contains("math-and-punctuation")) return;
      const found = PUNCTUATION.exec(next.data);
      if (!found) return;
      if (found[0].length < next.data.length) next.splitText(found[0].length);
      const pair = document.createElement("span");
      pair.className = "math-and-punctuation";
      math.parentNode.insertBefore(pair, math);
      pair.append(math, next);
    });
  }

  function start() {
    glue(document.querySelector(".bd-article") || document.body);
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
