/* The page's Python: Pyodide in a Web Worker, started by live-cells.js on a reader's first
 * click (nothing of it is loaded before). It loads the runtime the site serves
 * (_static/live/pyodide/, installed by tools/live_runtime.py), the wheels the chapter needs and
 * the package's own wheel, then runs the cells it is sent in one
 * scratchformer.book.live.Kernel. Everything a cell shows comes back as a message
 * {type: "output", cell, kind, data}; a cell's end as {type: "done", cell, ok}.
 * Stored training runs are read from _static/live/runs/ with a synchronous request (a worker
 * may make one), when a cell asks for one. */
"use strict";

let kernel = null;
let current = null; // the cell whose outputs are being sent
let runsBase = "";

function post(message) { self.postMessage(message); }

function emit(kind, data) {
  if (data && typeof data.toJs === "function") {
    const converted = data.toJs({ dict_converter: Object.fromEntries });
    data.destroy();
    data = converted;
  }
  post({ type: "output", cell: current, kind, data });
}

// A stored run from the site, as bytes, or null when the site has none under that name.
function fetchRun(name) {
  const request = new XMLHttpRequest();
  request.open("GET", runsBase + name, false);
  request.responseType = "arraybuffer";
  request.send();
  if (request.status !== 200) return null;
  return new Uint8Array(request.response);
}

async function start(options) {
  const begun = performance.now();
  importScripts(options.pyodide + "pyodide.js");
  runsBase = options.runs;
  const pyodide = await loadPyodide({ indexURL: options.pyodide, fullStdLib: false });
  post({ type: "progress", text: "Loading NumPy and matplotlib" });
  await pyodide.loadPackage(options.packages, { messageCallback: () => {}, errorCallback: (text) => post({ type: "progress", text }) });
  for (const wheel of options.wheels) {
    await pyodide.loadPackage(wheel, { messageCallback: () => {} });
  }
  pyodide.runPython(`
import os
os.environ["MPLBACKEND"] = "agg"  # figures are drawn into PNGs, as the build's inline backend does
import matplotlib.pyplot  # builds matplotlib's font cache now, not in the reader's first cell
`);
  const live = pyodide.pyimport("scratchformer.book.live");
  const reader = pyodide.runPython(`
def reader(fetch):
    def read(name):
        data = fetch(name)
        return None if data is None else data.to_bytes()
    return read
reader`);
  kernel = live.Kernel(emit, reader(fetchRun));
  post({ type: "ready", seconds: (performance.now() - begun) / 1000 });
}

self.onmessage = async (event) => {
  const message = event.data;
  try {
    if (message.type === "start") {
      await start(message);
    } else if (message.type === "skip") {
      kernel.skip(message.source, message.label, message.reason);
      post({ type: "skipped", cell: message.cell });
    } else if (message.type === "run") {
      current = message.cell;
      const ok = kernel.run(message.source, message.label, message.allowTraining || false);
      post({ type: "done", cell: message.cell, ok });
      current = null;
    }
  } catch (error) {
    post({ type: "failed", cell: message.cell ?? null, text: String(error && error.message || error) });
  }
};
