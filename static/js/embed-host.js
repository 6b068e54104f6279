// Included by a page that embeds a blocktrace explorable (both snippets of the Embed dialog load it).
// - Sizes each iframe marked data-blocktrace-embed to the height its page reports (embed-frame.js),
//   trusting a message only from that iframe's own window and from the origin of its src.
// - Asks the explorable's server whether it accepts this page (GET /embed-check); if not, writes in the
//   placeholder of a script-tag embed, or above the iframe, which option the server needs. As text only.
(function () {
  if (window.blocktraceEmbedHost) return;
  window.blocktraceEmbedHost = true;
  const MARK = "data-blocktrace-embed";
  const MIN_HEIGHT = 100;
  const MAX_HEIGHT = 12000; // a sane bound (the decoder lab is ~8,000 px in a 900 px column)

  function originOf(url) {
    try {
      const parsed = new URL(url, location.href);
      return parsed.protocol === "http:" || parsed.protocol === "https:" ? parsed.origin : null;
    } catch (error) {
      return null;
    }
  }

  window.addEventListener("message", (event) => {
    const data = event.data;
    if (!data || data.type !== "blocktrace:height" || !Number.isFinite(data.height)) return;
    for (const frame of document.querySelectorAll(`iframe[${MARK}]`)) {
      if (frame.contentWindow === event.source && originOf(frame.src) === event.origin) {
        const height = Math.min(MAX_HEIGHT, Math.max(MIN_HEIGHT, Math.ceil(data.height)));
        frame.style.height = `${height}px`;
        return;
      }
    }
  });

  function askHeight(frame) {
    // "*": a request carries nothing, and the frame may still be on about:blank.
    if (frame.contentWindow) frame.contentWindow.postMessage({ type: "blocktrace:ask-height" }, "*");
  }

  const answers = new Map(); // server origin -> its answer (a promise), asked once per page
  function answerOf(server) {
    if (!answers.has(server)) {
      answers.set(server, fetch(`${server}/embed-check`, { credentials: "omit", cache: "no-store" }).then(
        (response) => (response.ok ? response.json() : null), // an older server, or plain `panel serve`
        () => ({ allowed: false, message: `The explorable's server at ${server} cannot be reached from this page. ` +
          "Check that it is running and that this computer can reach it (a page on https cannot show an " +
          "explorable from a server on http).", command: "" })));
    }
    return answers.get(server);
  }

  function explain(element, answer) {
    if (!answer || element.hasAttribute("data-blocktrace-checked")) return;
    element.setAttribute("data-blocktrace-checked", answer.allowed ? "allowed" : "refused");
    if (answer.allowed) return;
    const box = document.createElement("div");
    box.className = "blocktrace-embed-refused";
    box.setAttribute("role", "alert");
    Object.assign(box.style, { border: "2px solid #b3261e", borderRadius: "6px", padding: "0.6rem 0.8rem",
      margin: "0.5rem 0", background: "#fff6f5", color: "#1b1f24", font: "inherit" });
    const text = document.createElement("p");
    text.style.margin = "0";
    text.textContent = String(answer.message || "");
    box.appendChild(text);
    if (answer.command) {
      const command = document.createElement("code");
      Object.assign(command.style, { display: "block", marginTop: "0.4rem", overflowWrap: "anywhere" });
      command.textContent = String(answer.command);
      box.appendChild(command);
    }
    if (element.tagName === "IFRAME") {
      element.before(box);
      // The framing policy lists no more origins than the check accepts, so this frame is refused too.
      element.style.display = "none";
    } else {
      element.prepend(box);
    }
  }

  function start() {
    for (const element of document.querySelectorAll(`[${MARK}]`)) {
      const isFrame = element.tagName === "IFRAME";
      const server = originOf(isFrame ? element.src : element.getAttribute("data-blocktrace-server"));
      if (!server) continue;
      if (isFrame) {
        element.addEventListener("load", () => askHeight(element));
        askHeight(element);
      }
      if (server !== location.origin) answerOf(server).then((answer) => explain(element, answer));
    }
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
