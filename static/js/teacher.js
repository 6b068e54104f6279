// Refresh the teacher's dashboard every few seconds without reloading the page (keeps scroll and focus).
(function () {
  const seconds = Number(document.body.dataset.refresh || 5);
  async function refresh() {
    try {
      const response = await fetch(location.href, { credentials: "same-origin", cache: "no-store" });
      if (response.redirected) {  // the login ended (a new password, or a day old): show the login page
        location.assign(response.url);
        return;
      }
      if (!response.ok) return;
      const fresh = new DOMParser().parseFromString(await response.text(), "text/html").querySelector("main");
      const main = document.querySelector("main");
      if (fresh && main && fresh.innerHTML !== main.innerHTML && !main.contains(document.activeElement)) {
        main.replaceWith(fresh);
      }
    } catch (error) {
      // The server may be restarting; the next tick tries again.
    }
  }
  setInterval(refresh, seconds * 1000);
})();
