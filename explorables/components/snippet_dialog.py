"""The Embed dialog: each snippet in a full-width box with its own Copy button.

A native <dialog> opened as a modal (Esc closes it, focus goes back to the Embed button). Copying runs
in the browser, inside the click: `navigator.clipboard` where the page is a secure context (https or
this machine), else the old copy command on the selected text, else the text is left selected for
Ctrl+C (a classroom server on http://192.168.… is not a secure context). Every text reaches the page as
a textarea's value or an element's textContent, never as markup. (Names are aria-labels: ReactiveHTML
suffixes every id, so aria-labelledby could not point at one.)
"""

from __future__ import annotations

import param
from panel.reactive import ReactiveHTML

from blocktrace.explorables.components.style import styled

__all__ = ["SnippetDialog"]

DIALOG_CSS = """
dialog.bt-embed-dialog { width: min(60rem, calc(100vw - 2rem)); max-height: calc(100vh - 2rem);
  box-sizing: border-box; border: 1px solid var(--bt-line); border-radius: 8px; padding: 1rem 1.25rem;
  color: var(--bt-ink); background: var(--bt-bg); }
dialog.bt-embed-dialog::backdrop { background: rgba(0, 0, 0, 0.45); }
.bt-embed-dialog h2 { margin: 0 0 0.5rem; font-size: 1.2rem; }
.bt-embed-dialog h3 { margin: 0.9rem 0 0.25rem; font-size: 1rem; }
.bt-snippet { display: flex; gap: 0.5rem; align-items: flex-start; }
.bt-snippet textarea { flex: 1 1 auto; min-width: 0; box-sizing: border-box;
  font: 0.85rem/1.4 ui-monospace, "DejaVu Sans Mono", Menlo, Consolas, monospace;
  padding: 0.4rem 0.5rem; border: 1px solid var(--bt-line); border-radius: 4px;
  background: var(--bt-card); color: var(--bt-ink); resize: vertical; overflow-wrap: anywhere; white-space: pre-wrap; }
.bt-embed-dialog button { font: inherit; padding: 0.3rem 0.9rem; border: 1px solid var(--bt-accent); border-radius: 4px;
  background: var(--bt-card); color: var(--bt-ink); cursor: pointer; white-space: nowrap; }
.bt-embed-dialog button.bt-copied { border-color: var(--bt-good); }
.bt-embed-dialog .bt-close { float: right; }
.bt-embed-dialog p { margin: 0.35rem 0; }
.bt-sr { position: absolute; width: 1px; height: 1px; overflow: hidden; clip-path: inset(50%); white-space: nowrap; }
@media (max-width: 40rem) { .bt-snippet { flex-direction: column; align-items: stretch; } }
"""

COPY_JS = """
state.copy = async (area, button, word, status, what) => {
  let copied = false;
  if (navigator.clipboard && window.isSecureContext) {
    try { await navigator.clipboard.writeText(area.value); copied = true; } catch (error) { copied = false; }
  }
  if (!copied) {
    area.focus();
    area.select();
    try { copied = document.execCommand("copy"); } catch (error) { copied = false; }
    if (copied) button.focus();
  }
  word.textContent = copied ? "Copied" : "Selected";
  button.classList.toggle("bt-copied", copied);
  status.textContent = copied ? `The ${what} is copied.`
                               : `The ${what} is selected: press Ctrl+C (⌘C on a Mac) to copy it.`;
};
state.show = () => {
  const texts = data.texts || {};
  iframe_text.value = texts.iframe || "";
  script_text.value = texts.script || "";
  gate_text.textContent = texts.gate_note || "";
  server_text.textContent = texts.server_note || "";
};
state.reset = () => {
  for (const [word, button] of [[iframe_word, copy_iframe], [script_word, copy_script]]) {
    word.textContent = "Copy";
    button.classList.remove("bt-copied");
  }
  copy_status.textContent = "";
};
"""


class SnippetDialog(ReactiveHTML):
    """The dialog of one Embed button; the server fills in `texts` and raises `opened` to show it."""

    # One Dict, not Strings: ReactiveHTML passes a String through an HTML sanitizer, which would strip the
    # very <iframe> and <script> tags the author has to copy. The page only ever sets them as text.
    texts = param.Dict(default={}, doc="The snippets and notes: iframe, script, gate_note, server_note")
    opened = param.Integer(default=0, bounds=(0, None), doc="Raised by the server each time the dialog should open")

    _template = """
<dialog id="dialog" class="bt-embed-dialog" aria-label="Embed this explorable">
  <button id="close" class="bt-close" type="button" onclick="${script('close')}">Close</button>
  <h2 id="heading">Embed this explorable, in its current state</h2>
  <h3 id="iframe_heading">As an iframe</h3>
  <p id="iframe_help" class="bt-muted">The iframe grows to fit the explorable (the script beside it sizes it);
    without the script it keeps its height and scrolls inside.</p>
  <div class="bt-snippet">
    <textarea id="iframe_text" readonly rows="5" aria-label="The iframe snippet"></textarea>
    <button id="copy_iframe" type="button" onclick="${script('copy_iframe')}"><span id="iframe_word">Copy</span><span
      class="bt-sr"> the iframe snippet</span></button>
  </div>
  <h3 id="script_heading">As a script tag (Bokeh's server_document)</h3>
  <p id="script_help" class="bt-muted">It renders inside the page itself; if the server does not accept the page,
    the page shows which option to add.</p>
  <div class="bt-snippet">
    <textarea id="script_text" readonly rows="10" aria-label="The script-tag snippet"></textarea>
    <button id="copy_script" type="button" onclick="${script('copy_script')}"><span id="script_word">Copy</span><span
      class="bt-sr"> the script-tag snippet</span></button>
  </div>
  <p id="copy_status" role="status" aria-live="polite"></p>
  <p id="gate_text" class="bt-muted"></p>
  <p id="server_text" class="bt-muted"></p>
</dialog>
"""

    _scripts = {
        "render": COPY_JS + "state.show();",
        "texts": "state.show(); state.reset();",
        "opened": "state.reset(); if (!dialog.open) dialog.showModal();",
        "close": "dialog.close();",
        "copy_iframe": "state.copy(iframe_text, copy_iframe, iframe_word, copy_status, 'iframe snippet');",
        "copy_script": "state.copy(script_text, copy_script, script_word, copy_status, 'script-tag snippet');",
    }

    def __init__(self, **params):
        params.setdefault("stylesheets", styled()["stylesheets"] + [DIALOG_CSS])
        super().__init__(**params)
