// Loaded by an explorable opened with ?embed=1 inside an iframe (explorables/components/embed.py):
// tells the page that frames it how tall its content is, at most once per animation frame, so that
// page's embed-host.js can size the iframe with no scrollbar inside. The message carries only a height.
(function () {
  if (window.parent === window || window.blocktraceFrame) return;
  window.blocktraceFrame = true;
  let last = -1;
  let pending = false;

  // The body is as tall as the iframe (100%), so measure what is in it: the bottom of its lowest child.
  function contentHeight() {
    let bottom = 0;
    for (const element of document.body.children) {
      const box = element.getBoundingClientRect();
      if (box.height > 0) bottom = Math.max(bottom, box.bottom + window.scrollY);
    }
    return Math.ceil(bottom);
  }

  function send(always) {
    pending = false;
    const height = contentHeight();
    if (height === 0 || (height === last && !always)) return;
    last = height;
    window.parent.postMessage({ type: "blocktrace:height", height: height, id: location.pathname }, "*");
  }

  function schedule() {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => send(false));
  }

  const resized = new ResizeObserver(schedule);
  for (const element of document.body.children) resized.observe(element);
  new MutationObserver((records) => {
    for (const record of records) {
      for (const node of record.addedNodes) if (node.nodeType === Node.ELEMENT_NODE) resized.observe(node);
    }
    schedule();
  }).observe(document.body, { childList: true });

  // The host page's script may start after the first report: it asks, and gets the height again.
  window.addEventListener("message", (event) => {
    if (event.source === window.parent && event.data && event.data.type === "blocktrace:ask-height") send(true);
  });
  schedule();
})();
