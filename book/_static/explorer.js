/*
 * Static explorers: wires the controls of every `.explorer` element on the page.
 *
 * The markup comes from helpers.widgets.Explorer (its text/html output). Each
 * explorer holds its pre-rendered frames in
 *   <script type="application/json" class="explorer-data">
 *   {"params": [{"name", "labels"}], "description", "frames": [data URIs],
 *    "index": [frame of each combination, C order], "alt": [text of each combination]}
 * and one control per parameter marked data-explorer-param="k" (a range input, radio
 * buttons or a select whose value is the index into that parameter's labels).
 * On the site each frame is a file (book/_ext/book_site.py writes them and puts their
 * addresses in "frames"): a frame is fetched when the explorer first shows it, and all of
 * an explorer's frames as soon as the reader first reaches for it (focus, pointer or
 * touch), so that moving a slider then swaps pictures at once. In Jupyter the frames stay
 * data URIs.
 * Moving a control swaps the picture, its alt text and caption, and the value label.
 *
 * Plain ES2017, no dependencies, no network. Without it, the reader sees the
 * initial frame and the (disabled) controls.
 */
(function () {
  "use strict";

  let groupCounter = 0;

  function setUp(root) {
    if (root.classList.contains("explorer-ready")) return;
    const script = root.querySelector("script.explorer-data");
    const img = root.querySelector("img.explorer-image");
    if (!script || !img) return;
    let data;
    try {
      data = JSON.parse(script.textContent);
    } catch (err) {
      return; // leave the initial frame in place
    }
    const params = data.params || [];
    const caption = root.querySelector(".explorer-caption");

    // C-order strides: the last parameter varies fastest.
    const strides = new Array(params.length);
    let stride = 1;
    for (let k = params.length - 1; k >= 0; k -= 1) {
      strides[k] = stride;
      stride *= params[k].labels.length;
    }

    // Radio groups are named from the content; make the names unique on the page.
    groupCounter += 1;
    root.querySelectorAll('input[type="radio"][data-explorer-param]').forEach((radio) => {
      radio.name = radio.name + "-" + groupCounter;
    });

    function selectedIndex(k) {
      const controls = root.querySelectorAll(
        'input[data-explorer-param="' + k + '"], select[data-explorer-param="' + k + '"]'
      );
      for (const control of controls) {
        if (control.type === "radio") {
          if (control.checked) return Number(control.value);
        } else {
          return Number(control.value);
        }
      }
      return 0;
    }

    function refresh() {
      let flat = 0;
      params.forEach((param, k) => {
        const n = param.labels.length;
        const i = Math.min(Math.max(selectedIndex(k) || 0, 0), n - 1);
        flat += i * strides[k];
        const label = param.labels[i];
        root.querySelectorAll('output[data-explorer-param="' + k + '"]').forEach((out) => {
          out.textContent = label;
        });
        root.querySelectorAll('input[type="range"][data-explorer-param="' + k + '"]')
          .forEach((range) => range.setAttribute("aria-valuetext", label));
      });
      const frame = data.frames[data.index[flat]];
      const text = (data.alt && data.alt[flat]) || "";
      if (frame && img.getAttribute("src") !== frame) img.setAttribute("src", frame);
      img.alt = text || data.description || "Interactive figure";
      if (caption) caption.textContent = text;
    }

    let fetched = false;
    function fetchFrames() {
      if (fetched) return;
      fetched = true;
      for (const frame of new Set(data.frames)) {
        if (!frame.startsWith("data:")) new Image().src = frame;
      }
    }
    ["focusin", "pointerover", "touchstart"].forEach((kind) =>
      root.addEventListener(kind, fetchFrames, { passive: true, once: true })
    );

    root.addEventListener("input", refresh);
    root.addEventListener("change", refresh);
    const form = root.querySelector("form.explorer-controls");
    if (form) form.addEventListener("submit", (event) => event.preventDefault());
    root.querySelectorAll("[data-explorer-param][disabled]").forEach((control) => {
      control.disabled = false;
    });
    root.classList.add("explorer-ready");
    refresh(); // a reload may have restored the controls' state
  }

  function setUpAll() {
    document.querySelectorAll(".explorer").forEach(setUp);
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", setUpAll);
  } else {
    setUpAll();
  }
})();
