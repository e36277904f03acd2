// The Korean edition (book/_ext/i18n.py): the few names that the theme and its extensions
// write into the page without a message catalogue, in the page's language, and the link to
// the other language opening in the same tab (the theme opens every header link in a new one).
(function () {
  "use strict";
  const WORDS = {
    ko: {
      "Main": "주 메뉴",
      "Page": "이 쪽",
      "Toggle hidden content": "숨긴 내용 펼치기/접기",
    },
  };
  function relabel() {
    const other = document.documentElement.lang === "ko" ? "en" : "ko";
    document.querySelectorAll(".btn-language-switch").forEach((a) => {
      a.removeAttribute("target");
      a.setAttribute("hreflang", other);
      const text = a.querySelector(".btn__text-container");
      if (text) text.setAttribute("lang", other); // read in its own language by screen readers
    });
    const words = WORDS[document.documentElement.lang];
    if (!words) return;
    document.querySelectorAll("[aria-label]").forEach((el) => {
      const label = el.getAttribute("aria-label");
      if (Object.prototype.hasOwnProperty.call(words, label)) el.setAttribute("aria-label", words[label]);
    });
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", () => setTimeout(relabel, 0));
  else setTimeout(relabel, 0);
  window.addEventListener("load", relabel);
})();
