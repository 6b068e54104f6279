// Submits the page's form marked bt-auto-submit once loaded (its button does the same without script).
(function () {
  "use strict";
  var form = document.getElementById("bt-auto-submit");
  if (form) { form.submit(); }
})();
