/*
 * The book's pages made one printable document (scripts/pdf.py runs this in Chromium).
 *
 * Each page of the site arrives as <template data-doc="notebooks/01_softmax"> holding the
 * page's article. For each, in reading order:
 * - the site's controls go (header links, buttons);
 * - an explorer becomes a figure: its initial frame, its caption and a note with the
 *   address of the page where it is interactive;
 * - each heading gets a named destination ("pdfh-N", for the contents and the
 *   bookmarks) and a chapter's number is shown as "Chapter N" above its title;
 * - every id is prefixed with the page's name, so that ids are unique in the book, and
 *   every link to a page of the book becomes a link inside the document (other links go
 *   to the website);
 * - each line of a code listing becomes a block (print.css indents the rest of a line
 *   too long for the column under its start).
 * - each number (an equation's, a figure's, a theorem's, ...) gets a named place;
 * - each page of the book is a named page whose running head is its title.
 * Returns the headings, in order: {doc, level, text, html, dest}.
 *
 * Plain ES2020, no dependencies, no network.
 */
(args) => {
  "use strict";
  const { site, base } = args;
  const templates = [...document.querySelectorAll("template[data-doc]")];
  const docs = new Set(templates.map((t) => t.dataset.doc));
  const slug = (doc) => doc.replace(/[^A-Za-z0-9_-]/g, "-");
  const article = document.querySelector("article");
  const headings = [];
  let counter = 0;

  function codeLines(pre) {
    const lines = [[]];
    const wrap = (node, wrappers) => {
      for (let i = wrappers.length - 1; i >= 0; i--) {
        const outer = wrappers[i].cloneNode(false);
        outer.append(node);
        node = outer;
      }
      return node;
    };
    const walk = (node, wrappers) => {
      for (const child of [...node.childNodes]) {
        if (child.nodeType === Node.TEXT_NODE) {
          child.data.split("\n").forEach((part, k) => {
            if (k) lines.push([]);
            if (part) lines[lines.length - 1].push(wrap(document.createTextNode(part), wrappers));
          });
        } else if (child.nodeType === Node.ELEMENT_NODE) {
          if (child.textContent.includes("\n")) walk(child, [...wrappers, child]);
          else lines[lines.length - 1].push(wrap(child, wrappers));
        }
      }
    };
    walk(pre, []);
    if (!lines[lines.length - 1].length) lines.pop();
    pre.replaceChildren(
      ...lines.map((nodes) => {
        const line = document.createElement("span");
        line.className = "pdf-line";
        // A wrapped line goes on 4 characters right of where its own code starts.
        const indent = /^[ \t]*/.exec(nodes.map((n) => n.textContent).join(""))[0].length + 4;
        line.style.paddingLeft = `${indent}ch`;
        line.style.textIndent = `-${indent}ch`;
        if (nodes.length) line.append(...nodes);
        else line.append("\u00a0");
        return line;
      }),
    );
  }

  // A link to a place of its own: Chromium names (as a PDF destination) only the targets
  // of links. pdf.py removes these links from the PDF and keeps the names.
  function selfLink(dest, nodes, id) {
    const link = document.createElement("a");
    link.className = "pdf-self";
    link.href = `#${dest}`;
    if (id) link.id = id;
    link.append(...nodes);
    return link;
  }

  function explorerFigure(explorer, doc) {
    const section = explorer.closest("section[id]");
    const url = `${site}${doc}.html${section ? "#" + section.id : ""}`;
    const controls = [...explorer.querySelectorAll(".explorer-label")].map((l) => l.textContent.trim());
    const image = explorer.querySelector("img.explorer-image");
    const shown = (explorer.querySelector(".explorer-caption") || {}).textContent || "";
    const description = (explorer.getAttribute("aria-label") || "").trim().replace(/\.$/, "");
    const figure = document.createElement("figure");
    figure.className = "pdf-explorer";
    image.removeAttribute("width");
    image.removeAttribute("height");
    figure.append(image);
    const caption = document.createElement("figcaption");
    const what = document.createElement("p");
    what.className = "pdf-explorer-caption";
    what.textContent = shown.trim() ? `${description}. Shown: ${shown.trim()}.` : `${description}.`;
    const note = document.createElement("p");
    note.className = "pdf-explorer-note";
    const named = controls.join(", ");
    note.append(
      controls.length
        ? `Interactive on the website, where ${controls.length > 1 ? "its controls" : "a slider"} (${named}) ${controls.length > 1 ? "change" : "changes"} the figure: `
        : "Interactive on the website: ",
    );
    const link = document.createElement("a");
    link.href = url;
    link.textContent = url;
    note.append(link, ".");
    caption.append(what, note);
    figure.append(caption);
    (explorer.closest("div.output") || explorer).replaceWith(figure);
  }

  for (const template of templates) {
    const doc = template.dataset.doc;
    const prefix = slug(doc);
    const page = document.createElement("section");
    page.className = "pdf-page";
    page.id = prefix;
    page.append(template.content.cloneNode(true));
    template.remove();
    page.querySelectorAll("a.headerlink, button, .d-print-none").forEach((e) => e.remove());
    page.querySelectorAll("div.explorer").forEach((e) => explorerFigure(e, doc));
    for (const section of page.querySelectorAll("section")) {
      const heading = [...section.children].find((c) => /^H[1-3]$/.test(c.tagName));
      if (!heading) continue;
      const dest = `pdfh-${++counter}`;
      const text = heading.textContent.replace(/\s+/g, " ").trim();
      headings.push({ doc, level: Number(heading.tagName[1]), text, html: heading.innerHTML, dest });
      heading.id = dest;
      const number = heading.querySelector("span.section-number");
      if (heading.tagName === "H1" && number) {
        number.textContent = `Chapter ${number.textContent.trim().replace(/\.$/, "")}`;
      }
      // A link to itself, only so that Chromium names the heading's place (pdf.py drops it).
      heading.append(selfLink(dest, [...heading.childNodes]));
    }
    // Every number of the site (an equation's, a figure's, a table's, a theorem's, an
    // exercise's) gets a named place too, "pdfn-" and its element's id (tests/pdf checks
    // each number at its place).
    for (const number of page.querySelectorAll("div.math[id] > span.eqno, span.caption-number")) {
      const owner = number.closest("div.math[id], figure[id], table[id], div.admonition[id]");
      if (!owner) continue;
      const dest = `pdfn-${prefix}--${owner.id}`;
      number.replaceChildren(selfLink(dest, [...number.childNodes], dest));
    }
    for (const element of page.querySelectorAll("[id]")) {
      if (element !== page && !/^pdf[hn]-/.test(element.id)) element.id = `${prefix}--${element.id}`;
    }
    const here = new URL(`${doc}.html`, base);
    for (const link of page.querySelectorAll("a[href]")) {
      const href = link.getAttribute("href");
      if (/^#pdf[hn]-/.test(href) || /^[a-z][a-z0-9+.-]*:/i.test(href)) continue;
      const url = new URL(href, here);
      const target = decodeURIComponent(url.pathname.slice(new URL(base).pathname.length)).replace(/\.html$/, "");
      const fragment = url.hash.slice(1);
      if (docs.has(target)) {
        link.setAttribute("href", fragment ? `#${slug(target)}--${fragment}` : `#${slug(target)}`);
      } else if (link.classList.contains("image-reference")) {
        link.replaceWith(...link.childNodes);
      } else {
        link.setAttribute("href", site + url.pathname.slice(new URL(base).pathname.length) + url.hash);
      }
    }
    for (const image of page.querySelectorAll("img[src]")) {
      const src = image.getAttribute("src");
      if (!src.startsWith("data:")) image.src = new URL(src, here).href;
    }
    page.querySelectorAll(".cell_input pre, div[class^='highlight-'] pre").forEach(codeLines);
    // Code in a table may break after "_" or "(" (check_softmax_jacobian(my_softmax_jacobian)).
    for (const code of page.querySelectorAll("table code.literal")) {
      const walker = document.createTreeWalker(code, NodeFilter.SHOW_TEXT);
      const texts = [];
      while (walker.nextNode()) texts.push(walker.currentNode);
      for (const text of texts) {
        const parts = text.data.split(/(?<=[_(])/);
        if (parts.length < 2) continue;
        const pieces = parts.flatMap((part, k) => (k ? [document.createElement("wbr"), part] : [part]));
        text.replaceWith(...pieces);
      }
    }
    article.append(page);
  }
  // Running heads: each page of the book is a named page whose head is its title.
  const rules = [];
  for (const h of headings.filter((h) => h.level === 1)) {
    const name = `pdf-${slug(h.doc)}`;
    rules.push(`#${CSS.escape(slug(h.doc))} { page: ${name}; }`);
    rules.push(`@page ${name} { @top-left { content: ${JSON.stringify(h.text)}; } }`);
  }
  const style = document.createElement("style");
  style.textContent = rules.join("\n");
  document.head.append(style);
  return headings;
}
