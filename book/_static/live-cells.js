/* Live cells: a chapter's code cells, edited and run in the page (book/_ext/live_cells.py adds
 * this script to the chapters whose cells run in a browser).
 *
 * Before a reader's first click nothing is fetched: each shown cell gets a bar (Run, Edit,
 * Reset) and, the first one, a line saying what the first run downloads. The first Run starts
 * Python (Pyodide, served by the site itself, in a Web Worker: live-worker.js), reads the
 * chapter's cells (_static/live/cells/<page>.json, which hold the cells the page hides too),
 * runs every cell above the clicked one that has not run yet, once, then the clicked cell with
 * the code its box shows; its outputs replace the build's. A cell that cannot run in a browser
 * says why instead of a Run button, and the worker is told it was skipped, so a later cell
 * that needs what it made says which cell that was. Reset brings back the build's code and
 * output; Stop ends the worker (Python's state is lost, and the next Run starts it again).
 * window.scratchformerLive exposes the same operations to the browser tests. */
(() => {
  "use strict";
  const script = document.currentScript;
  const base = new URL(".", script.src).href; // the site's _static/
  const cellsUrl = new URL(script.dataset.cells, base).href;
  const runtimeBytes = Number(script.dataset.bytes || 0);
  const REASONS = {
    torch: "PyTorch, which this cell compares with, does not run in a browser: it runs in the book's build",
    texts: "it reads the State of the Union addresses (10.8 MB of text), which the page does not load: it runs in the book's build and the downloaded notebook",
    model: "it runs SmolLM2-135M, whose 98 MB file the page does not load: it runs in the book's build and the downloaded notebook",
    "after-torch": "it uses what a cell above computed with PyTorch, which does not run in a browser: it runs in the book's build",
    "after-texts": "it uses the State of the Union addresses a cell above read, which the page does not load: it runs in the book's build and the downloaded notebook",
    "after-model": "it uses SmolLM2-135M, which a cell above loaded and the page does not: it runs in the book's build and the downloaded notebook",
  };

  const state = {
    worker: null, ready: null, cells: null, done: new Set(), pending: null,
    chain: Promise.resolve(), startedAt: 0, typesetting: [],
  };

  function megabytes(bytes) { return `${(bytes / 1e6).toFixed(1)} MB`; }

  function indexOf(element) {
    const match = /(?:^|\s)live-cell-(\d+)(?:\s|$)/.exec(element.className);
    return match ? Number(match[1]) : null;
  }

  function needOf(element) {
    for (const need of Object.keys(REASONS)) {
      if (element.classList.contains(`live-needs-${need}`)) return need;
    }
    return null;
  }

  function codeBox(element) { return element.querySelector(".cell_input pre"); }

  function codeOf(element) {
    const pre = codeBox(element);
    return pre ? pre.innerText.replace(/\u00a0/g, " ").replace(/\n$/, "") : null;
  }

  // ---- the bar under each cell -----------------------------------------------------------
  function button(text, className, label) {
    const node = document.createElement("button");
    node.type = "button";
    node.className = `live-button ${className}`;
    node.textContent = text;
    if (label) node.setAttribute("aria-label", label);
    return node;
  }

  function decorate(element, number, first) {
    const input = element.querySelector(".cell_input");
    if (!input) return;
    const need = needOf(element);
    // the bar is a direct child of the cell, after the box that holds the code (folded or not)
    const anchor = [...element.children].find((child) => child.contains(input));
    const bar = document.createElement("div");
    bar.className = "live-bar";
    if (need) {
      bar.classList.add("live-bar-skip");
      bar.textContent = `Cell ${number} does not run in the page: ${REASONS[need]}.`;
      anchor.after(bar);
      return;
    }
    const pre = codeBox(element);
    element.dataset.liveCode = pre.innerHTML;
    const run = button("Run", "live-run", `Run cell ${number} in the page`);
    const edit = button("Edit", "live-edit", `Edit the code of cell ${number}`);
    const reset = button("Reset", "live-reset", `Bring back the book's code and output of cell ${number}`);
    reset.hidden = true;
    const status = document.createElement("span");
    status.className = "live-status";
    status.setAttribute("role", "status");
    if (first) {
      status.textContent = runtimeBytes
        ? `Run executes the chapter's code in your browser; the first Run downloads Python, NumPy and matplotlib (${megabytes(runtimeBytes)}) once.`
        : "Run executes the chapter's code in your browser.";
    }
    const label = document.createElement("span");
    label.className = "live-number";
    label.textContent = `Cell ${number}`;
    bar.append(label, run, edit, reset, status);
    if (element.classList.contains("live-without-torch")) {
      const note = document.createElement("span");
      note.className = "live-note";
      note.textContent = "In the page this cell runs without its PyTorch import (PyTorch does not run in a browser).";
      bar.append(note);
    }
    anchor.after(bar);
    run.addEventListener("click", () => {
      if (run.dataset.running === "yes") stop(element); else request(element);
    });
    edit.addEventListener("click", () => {
      const folded = pre.closest("details");
      if (folded) folded.open = true;  // a cell whose code the page folds: unfold it to edit
      pre.setAttribute("contenteditable", "plaintext-only");
      pre.setAttribute("spellcheck", "false");
      pre.setAttribute("role", "textbox");
      pre.setAttribute("aria-multiline", "true");
      pre.setAttribute("aria-label", `Code of cell ${number}`);
      element.classList.add("live-editing");
      reset.hidden = false;
      pre.focus();
    });
    reset.addEventListener("click", () => resetCell(element));
  }

  function resetCell(element) {
    const pre = codeBox(element);
    pre.innerHTML = element.dataset.liveCode;
    for (const name of ["contenteditable", "spellcheck", "role", "aria-multiline", "aria-label"]) {
      pre.removeAttribute(name);
    }
    element.classList.remove("live-editing");
    const live = element.querySelector(":scope > .live-output");
    if (live) live.remove();
    const built = element.querySelector(":scope > .cell_output");
    if (built) built.hidden = false;
    element.querySelector(".live-reset").hidden = true;
    setStatus(element, "The book's code and output are back (Python keeps what it ran).");
  }

  function setStatus(element, text) {
    const status = element.querySelector(".live-status");
    if (status) status.textContent = text;
  }

  function setRunning(element, running) {
    const run = element.querySelector(".live-run");
    if (!run) return;
    run.dataset.running = running ? "yes" : "no";
    run.textContent = running ? "Stop" : "Run";
    element.classList.toggle("live-running", running);
  }

  // ---- outputs ---------------------------------------------------------------------------
  function outputArea(element) {
    let area = element.querySelector(":scope > .live-output");
    if (!area) {
      area = document.createElement("div");
      area.className = "live-output cell_output docutils container";
      area.setAttribute("aria-live", "polite");
      const bar = element.querySelector(":scope > .live-bar");
      (bar || element.lastElementChild).after(area);
    }
    const built = element.querySelector(":scope > .cell_output:not(.live-output)");
    if (built) built.hidden = true;
    const reset = element.querySelector(".live-reset");
    if (reset) reset.hidden = false;
    return area;
  }

  function textBlock(area, text, kind) {
    // Consecutive writes to one stream join one box, as Jupyter shows them.
    const last = area.lastElementChild;
    if (last && last.dataset.kind === kind && (kind === "stdout" || kind === "stderr")) {
      last.querySelector("pre").textContent += text;
      return;
    }
    const box = document.createElement("div");
    box.dataset.kind = kind;
    const classes = {
      stdout: "output stream highlight-myst-ansi notranslate",
      stderr: "output stderr highlight-myst-ansi notranslate",
      "text/plain": "output text_plain highlight-myst-ansi notranslate",
      error: "output traceback highlight-ipythontb notranslate live-error",
      claim: "output live-claim notranslate",
    };
    box.className = classes[kind] || "output notranslate";
    const inner = document.createElement("div");
    inner.className = "highlight";
    const pre = document.createElement("pre");
    pre.textContent = text;
    inner.append(pre);
    box.append(inner);
    area.append(box);
  }

  function inline(text) {
    const escaped = text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
    return escaped
      .replace(/`([^`]+)`/g, "<code>$1</code>")
      .replace(/\*\*([^*]+)\*\*/g, "<strong>$1</strong>")
      .replace(/(^|[^*])\*([^*\s][^*]*)\*/g, "$1<em>$2</em>");
  }

  // The Markdown the chapters display: pipe tables (sfb.markdown_table) and paragraphs.
  function markdown(source) {
    const lines = source.split("\n");
    const parts = [];
    let i = 0;
    while (i < lines.length) {
      if (/^\s*\|/.test(lines[i]) && i + 1 < lines.length && /^\s*\|?\s*:?-{2,}/.test(lines[i + 1])) {
        const row = (line) => line.trim().replace(/^\||\|$/g, "").split("|").map((cell) => cell.trim());
        const aligns = row(lines[i + 1]).map((cell) => (cell.endsWith(":") ? (cell.startsWith(":") ? "center" : "right") : "left"));
        const head = row(lines[i]);
        let html = '<div class="pst-scrollable-table-container"><table class="table"><thead><tr>';
        head.forEach((cell, k) => { html += `<th class="text-${aligns[k]}">${inline(cell)}</th>`; });
        html += "</tr></thead><tbody>";
        i += 2;
        while (i < lines.length && /^\s*\|/.test(lines[i])) {
          html += "<tr>";
          row(lines[i]).forEach((cell, k) => { html += `<td class="text-${aligns[k] || "left"}">${inline(cell)}</td>`; });
          html += "</tr>";
          i += 1;
        }
        parts.push(html + "</tbody></table></div>");
      } else if (lines[i].trim()) {
        const paragraph = [];
        while (i < lines.length && lines[i].trim() && !/^\s*\|/.test(lines[i])) paragraph.push(lines[i++]);
        parts.push(`<p>${inline(paragraph.join(" "))}</p>`);
      } else {
        i += 1;
      }
    }
    return parts.join("");
  }

  function show(element, kind, data) {
    const area = outputArea(element);
    if (kind === "image/png") {
      const box = document.createElement("div");
      box.className = "output image_png live-figure";
      const image = document.createElement("img");
      image.src = `data:image/png;base64,${data.data}`;
      image.width = data.width;
      image.height = data.height;
      image.alt = "The figure this cell drew in the page (the build's figure, with its description, is brought back by Reset).";
      box.append(image);
      area.append(box);
    } else if (kind === "text/markdown" || kind === "text/html") {
      const box = document.createElement("div");
      // mathjax_process: the book's MathJax typesets only what is marked so; \( \) are its
      // inline delimiters, where the chapters' Markdown writes $ $.
      box.className = "output text_markdown mathjax_process";
      if (kind === "text/markdown") {
        box.innerHTML = markdown(data.replace(/\$([^$\n]+)\$/g, "\\($1\\)"));
      } else {
        box.textContent = data;
      }
      area.append(box);
      if (window.MathJax && window.MathJax.typesetPromise) {
        state.typesetting.push(window.MathJax.typesetPromise([box]).catch(() => {}));
      }
    } else if (kind === "train") {
      const box = document.createElement("div");
      box.className = "output live-train";
      const text = document.createElement("p");
      text.textContent = data.message;
      const go = button("Train", "live-train-button", "Train the model in the page");
      go.addEventListener("click", () => { box.remove(); request(element, { allowTraining: true }); });
      box.append(text, go);
      area.append(box);
    } else {
      textBlock(area, String(data), kind);
    }
  }

  // ---- the worker ------------------------------------------------------------------------
  function startWorker(status) {
    if (state.ready) return state.ready;
    state.startedAt = performance.now();
    state.worker = new Worker(new URL("live-worker.js", base).href);
    state.ready = Promise.all([
      fetch(cellsUrl).then((response) => {
        if (!response.ok) throw new Error(`the chapter's cells (${cellsUrl}) could not be read: ${response.status}`);
        return response.json();
      }),
      new Promise((resolve, reject) => {
        state.onReady = resolve;
        state.onFail = reject;
      }),
    ]).then(([cells, seconds]) => {
      state.cells = cells;
      return seconds;
    });
    state.worker.onmessage = (event) => receive(event.data);
    state.worker.onerror = (event) => {
      const error = new Error(event.message || "the page's Python stopped");
      if (state.onFail) state.onFail(error);
      if (state.pending) state.pending.reject(error);
    };
    status(`Starting Python${runtimeBytes ? ` (${megabytes(runtimeBytes)} the first time)` : ""}…`);
    const manifest = new URL("live/manifest.json", base).href;
    fetch(manifest).then((response) => response.json()).then((info) => {
      const packages = ["numpy", "matplotlib"]; // the package's book tools import matplotlib
      const wheels = [info.scratchformer, ...(script.dataset.num2words === "yes" ? [info.num2words] : [])]
        .map((name) => new URL(`live/pyodide/${name}`, base).href);
      state.worker.postMessage({
        type: "start",
        pyodide: new URL("live/pyodide/", base).href,
        runs: new URL("live/runs/", base).href,
        packages,
        wheels,
      });
    }).catch((error) => state.onFail(error));
    return state.ready;
  }

  function receive(message) {
    if (message.type === "ready") {
      state.onReady(message.seconds);
    } else if (message.type === "progress") {
      if (state.progress) state.progress(message.text);
    } else if (message.type === "failed") {
      const error = new Error(message.text);
      if (state.pending) state.pending.reject(error); else if (state.onFail) state.onFail(error);
    } else if (message.type === "output" && state.pending) {
      const { element, display, above } = state.pending;
      if (display || ["error", "claim", "train"].includes(message.kind)) {
        const target = element;
        if (above && !display) {
          show(target, "claim", `In a cell above that the page does not show (${above}):`);
        }
        show(target, message.kind, message.data);
      }
    } else if ((message.type === "done" || message.type === "skipped") && state.pending) {
      const pending = state.pending;
      state.pending = null;
      pending.resolve(message.type === "skipped" ? true : message.ok);
    }
  }

  function send(message, element, display, above) {
    return new Promise((resolve, reject) => {
      state.pending = { element, display, above, resolve, reject };
      state.worker.postMessage(message);
    });
  }

  function stop(element) {
    if (state.worker) state.worker.terminate();
    const pending = state.pending;
    state.worker = null;
    state.ready = null;
    state.done = new Set();
    state.pending = null;
    if (pending) pending.reject(new Error("stopped"));
    setRunning(element, false);
    setStatus(element, "Stopped: Python ended and what it held is lost; the next Run starts it again and runs the cells above.");
  }

  // ---- running ---------------------------------------------------------------------------
  // The code the page runs for a cell: the build's (less the PyTorch imports the page leaves
  // out), or what the reader typed into its box, less the same imports.
  function sourceOf(cell, node) {
    if (!node || !node.classList.contains("live-editing") || codeOf(node) === null) return cell.source;
    const left = new Set((cell.stripped || []).map((line) => line.trim()));
    // each left-out line stays as an empty one, so that tracebacks keep the box's line numbers
    return codeOf(node).split("\n").map((line) => (left.has(line.trim()) ? "" : line)).join("\n");
  }

  function request(element, options = {}) {
    state.chain = state.chain.then(() => runUpTo(element, options)).catch(() => {});
    return state.chain;
  }

  function pageCells() {
    const map = new Map();
    for (const node of document.querySelectorAll("div.cell[class*='live-cell-']")) map.set(indexOf(node), node);
    return map;
  }

  async function runUpTo(element, options) {
    const target = indexOf(element);
    const status = (text) => setStatus(element, text);
    setRunning(element, true);
    state.progress = status;
    try {
      const seconds = await startWorker(status);
      if (!state.announced) {
        state.announced = true;
        status(`Python started in ${seconds.toFixed(1)} s.`);
      }
      const nodes = pageCells();
      const above = state.cells.cells.filter((cell) => cell.index < target && !state.done.has(cell.index));
      const skipped = above.filter((cell) => !cell.run && cell.number).map((cell) => cell.number);
      let count = 0;
      for (const cell of above) {
        count += 1;
        status(`Running the cells above (${count} of ${above.length})…`);
        const node = nodes.get(cell.index);
        const label = cell.number ? `cell ${cell.number}` : "a cell the page hides (its glue and checks)";
        if (!cell.run) {
          await send({ type: "skip", cell: cell.index, source: cell.source, label, reason: REASONS[cell.need] }, element, false);
          state.done.add(cell.index);
          continue;
        }
        const source = sourceOf(cell, node);
        const shown = node && node.querySelector(".cell_input");
        const ok = await send({ type: "run", cell: cell.index, source, label }, shown ? node : element, false, shown ? null : label);
        state.done.add(cell.index);
        if (!ok) {
          status(`Stopped at ${label} above, which failed (its error is shown under it).`);
          return;
        }
      }
      const mine = state.cells.cells.find((cell) => cell.index === target);
      const area = outputArea(element);
      area.replaceChildren();
      status("Running…");
      const begun = performance.now();
      const ok = await send({ type: "run", cell: target, source: sourceOf(mine, element), label: `cell ${mine ? mine.number : "?"}`, allowTraining: !!options.allowTraining }, element, true);
      state.done.add(target);
      await Promise.all(state.typesetting.splice(0));  // the formulas of its tables, set
      if (mine && mine.differs && mine.differs.length) {
        const note = document.createElement("p");
        note.className = "live-empty live-differs";
        note.textContent = mine.differs.map(([name, where]) =>
          `${name} was also used by ${where}, which runs only in the build: what this cell draws from it here differs from the build's.`).join(" ");
        area.append(note);
      }
      const took = ((performance.now() - begun) / 1000).toFixed(1);
      if (!area.childElementCount) {
        const note = document.createElement("p");
        note.className = "live-empty";
        note.textContent = "(This cell shows nothing: it ran and defined what the next cells use.)";
        area.append(note);
      }
      const left = skipped.length
        ? ` Skipped above, as they do not run in the page: cell${skipped.length > 1 ? "s" : ""} ${skipped.join(", ")}.`
        : "";
      status((ok ? `Ran in the page in ${took} s.` : `Stopped after ${took} s (see below).`) + left);
    } catch (error) {
      if (error && error.message === "stopped") return;
      if (!state.cells) {  // Python did not start: the next Run tries again from the start
        if (state.worker) state.worker.terminate();
        Object.assign(state, { worker: null, ready: null, done: new Set(), pending: null });
      }
      status(`The page's Python failed: ${error && error.message ? error.message : error}`);
    } finally {
      state.progress = null;
      setRunning(element, false);
    }
  }

  function init() {
    const cells = [...document.querySelectorAll("div.cell[class*='live-cell-']")];
    if (!cells.length) return;
    if (typeof WebAssembly !== "object" || typeof Worker !== "function") {
      const note = document.createElement("p");
      note.className = "live-bar live-bar-skip";
      note.textContent = "This browser cannot run the code in the page (it lacks WebAssembly or Web Workers); the outputs shown are the book's build.";
      const first = cells[0].querySelector(".cell_input");
      if (first) first.after(note);
      return;
    }
    let number = 0;
    let first = true;
    for (const element of cells) {
      number += 1;
      decorate(element, number, first && !needOf(element) && element.querySelector(".cell_input"));
      if (!needOf(element) && element.querySelector(".cell_input")) first = false;
    }
  }

  window.scratchformerLive = {
    run: (element, options) => request(element, options),
    stop,
    reset: resetCell,
    state,
  };
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init); else init();
})();
