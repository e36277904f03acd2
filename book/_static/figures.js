/*
 * A figure shown smaller than it was drawn (on a phone: a 712 px figure in a 342 px
 * column, its labels 5 to 6 px tall) opens full-screen at its own size, zoomable.
 *
 * Every picture of the article (a figure, a plot a code cell printed, an explorer) gets
 * an "Enlarge" button over its top right corner, shown while the picture is displayed
 * below 90% of its natural width (the width it is drawn for, at which the browser tests
 * keep its smallest text at 9 px or more); tapping the picture does the same. The button
 * opens a modal <dialog> (focus moves into it and stays there; Escape or "Close" shuts it
 * and focus returns to the button) holding the picture itself at its natural width, or,
 * for an explorer, the whole explorer, whose controls keep working there. The picture
 * scrolls both ways in the dialog (arrow keys once it has focus, or a finger), and "Zoom
 * in", "Zoom out" and "Fit" (or the keys +, - and 0) change its size from a quarter to
 * four times its natural width. The picture's alternative text stays its name.
 *
 * Plain ES2017, no dependencies, no network.
 */
(function () {
  "use strict";

  const SHOWN_BELOW = 0.9; // of the natural width: the button appears
  // The viewer's words in the page's language (the Korean edition: book/_ext/i18n.py).
  const WORDS = {
    en: {
      enlarged: "Enlarged figure", zoomOut: "Zoom out", fit: "Fit", zoomIn: "Zoom in", close: "Close",
      stage: "Figure at full size: scroll with the arrow keys", enlarge: "Enlarge", enlargeLabel: "Enlarge the figure",
    },
    ko: {
      enlarged: "확대한 그림", zoomOut: "축소", fit: "맞춤", zoomIn: "확대", close: "닫기",
      stage: "원래 크기의 그림: 화살표 키로 움직인다", enlarge: "확대", enlargeLabel: "그림 확대",
    },
  };
  const T = WORDS[document.documentElement.lang] || WORDS.en;
  let dialog, stage, placeholder, moved, opener, natural, scale;

  function naturalWidth(img) {
    return (
      parseFloat(img.style.width) ||
      parseFloat(img.getAttribute("width")) ||
      (img.naturalWidth ? img.naturalWidth / 2 : 0)
    );
  }

  function target(img) {
    return img.closest(".explorer") || img;
  }

  function makeDialog() {
    dialog = document.createElement("dialog");
    dialog.className = "figure-viewer";
    dialog.setAttribute("aria-label", T.enlarged);
    dialog.innerHTML =
      '<div class="figure-viewer-bar">' +
      `<button type="button" data-zoom="out" aria-label="${T.zoomOut}">\u2212</button>` +
      `<button type="button" data-zoom="fit">${T.fit}</button>` +
      `<button type="button" data-zoom="in" aria-label="${T.zoomIn}">+</button>` +
      `<button type="button" data-zoom="close" class="figure-viewer-close">${T.close}</button>` +
      "</div>" +
      '<div class="figure-viewer-stage" tabindex="0" role="group" ' +
      `aria-label="${T.stage}"></div>`;
    stage = dialog.querySelector(".figure-viewer-stage");
    dialog.addEventListener("click", (event) => {
      const button = event.target.closest("button[data-zoom]");
      if (button) act(button.dataset.zoom);
    });
    dialog.addEventListener("keydown", (event) => {
      if (event.key === "Escape") {
        event.preventDefault();
        dialog.close();
        return;
      }
      if (event.target.closest("input, select")) return;
      const key = { "+": "in", "=": "in", "-": "out", 0: "fit" }[event.key];
      if (key) {
        event.preventDefault();
        act(key);
      }
    });
    dialog.addEventListener("close", restore);
    document.body.append(dialog);
  }

  function picture() {
    return moved && (moved.matches("img") ? moved : moved.querySelector("img.explorer-image"));
  }

  function apply() {
    const img = picture();
    if (!img) return;
    img.style.setProperty("width", `${Math.round(natural * scale)}px`, "important");
    img.style.setProperty("max-width", "none", "important");
    img.style.setProperty("height", "auto", "important");
  }

  function act(what) {
    if (what === "close") return dialog.close();
    if (what === "in") scale = Math.min(scale * 1.5, 4);
    if (what === "out") scale = Math.max(scale / 1.5, 0.25);
    if (what === "fit") scale = Math.min(1, (stage.clientWidth - 16) / natural);
    apply();
  }

  function open(img, button) {
    if (!dialog) makeDialog();
    if (dialog.open) return;
    opener = button;
    natural = naturalWidth(img);
    scale = 1;
    moved = target(img);
    placeholder = document.createElement("div");
    placeholder.className = "figure-viewer-placeholder";
    placeholder.style.height = `${moved.getBoundingClientRect().height}px`;
    moved.dataset.savedStyle = picture().getAttribute("style") || "";
    moved.replaceWith(placeholder);
    stage.append(moved);
    apply();
    dialog.showModal();
    stage.scrollTo(0, 0);
    stage.focus();
  }

  function restore() {
    if (!moved) return;
    const img = picture();
    const saved = moved.dataset.savedStyle;
    if (saved) img.setAttribute("style", saved);
    else img.removeAttribute("style");
    delete moved.dataset.savedStyle;
    placeholder.replaceWith(moved);
    moved = placeholder = null;
    if (opener) opener.focus();
  }

  function setUp(img) {
    if (img.dataset.viewer) return;
    img.dataset.viewer = "";
    // Sphinx wraps a scaled picture in a link to its file: the button goes beside the
    // link, not in it, and a tap on the picture opens the viewer instead of the file.
    const link = img.parentElement && img.parentElement.closest("a");
    const holder = (link || img).parentElement;
    if (!holder) return;
    const button = document.createElement("button");
    button.type = "button";
    button.className = "figure-zoom";
    button.innerHTML = `<i class="fa-solid fa-expand" aria-hidden="true"></i> ${T.enlarge}`;
    button.setAttribute("aria-label", T.enlargeLabel);
    button.addEventListener("click", () => open(img, button));
    img.addEventListener("click", (event) => {
      if (!holder.classList.contains("figure-zoomable") || dialog?.contains(img)) return;
      event.preventDefault();
      open(img, button);
    });
    holder.classList.add("figure-holder");
    holder.append(button);
    const check = () => {
      if (dialog && dialog.contains(img)) return; // shown in the viewer: no change
      const shown = img.getBoundingClientRect().width;
      const small = shown > 0 && shown < SHOWN_BELOW * naturalWidth(img);
      holder.classList.toggle("figure-zoomable", small);
    };
    if (typeof ResizeObserver !== "undefined") new ResizeObserver(check).observe(img);
    img.addEventListener("load", check);
    check();
  }

  function start() {
    const article = document.querySelector(".bd-article");
    if (!article || typeof HTMLDialogElement === "undefined") return;
    article
      .querySelectorAll("figure img, .cell_output img, img.explorer-image")
      .forEach(setUp);
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
