// LTI's client-side postMessages (platform storage), for a launch in a browser that keeps no cookie in the
// LMS's frame. The page (app/classroom/templates/lti_storage.html) says what to do in its data attributes:
//   put: keep `value` under `key` in the platform's storage, then go on to `next` (the LMS's login);
//   get: read `key` back and post the launch form again with it.
// Messages go only to the platform's `origin`, and only its answers to our own message ids are read.
// Without an answer within WAIT_MS, put goes to `fallback` (a login that checks for cookies, or offers a new
// window) and get says the launch could not be confirmed.
(function () {
  "use strict";
  var WAIT_MS = 4000;
  var page = document.getElementById("lti-storage");
  if (!page) { return; }
  var d = page.dataset;

  function storageFrame() {
    try {
      return d.target === "_parent" ? window.parent : window.parent.frames[d.target];
    } catch (error) {
      return null;
    }
  }

  function ask(message) {
    return new Promise(function (resolve, reject) {
      var frame = storageFrame();
      if (!frame || frame === window) { reject(new Error("no platform storage")); return; }
      var id = "bt-" + Math.random().toString(36).slice(2) + Date.now().toString(36);
      var timer = setTimeout(function () { finish(); reject(new Error("no answer")); }, WAIT_MS);
      function finish() { clearTimeout(timer); window.removeEventListener("message", listen); }
      function listen(event) {
        var data = event.data;
        if (event.origin !== d.origin || !data || typeof data !== "object" || data.message_id !== id ||
            data.subject !== message.subject + ".response") { return; }
        finish();
        if (data.error) { reject(new Error(String(data.error.code || "error"))); } else { resolve(data); }
      }
      window.addEventListener("message", listen);
      message.message_id = id;
      frame.postMessage(message, d.origin);
    });
  }

  function failed() {
    document.getElementById("lti-storage-status").hidden = true;
    document.getElementById("lti-storage-failed").hidden = false;
  }

  if (d.mode === "put") {
    ask({subject: "lti.put_data", key: d.key, value: d.value}).then(function () {
      window.location.href = d.next;
    }, function () {
      window.location.href = d.fallback;
    });
  } else if (d.mode === "get") {
    ask({subject: "lti.get_data", key: d.key}).then(function (answer) {
      var form = document.getElementById("lti-storage-form");
      if (typeof answer.value !== "string" || !answer.value) { failed(); return; }
      form.elements.lti_storage_value.value = answer.value;
      form.submit();
    }, failed);
  }
})();
