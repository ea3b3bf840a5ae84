// One per page (tx_explorer/ui/sections.py, refill_lost_sections): a section opened on demand whose box is open but
// still empty once the app has been idle a while lost the run that was to fill it (under a burst, a click's rerun
// racing another section's). Ask again, a rerun of the page, ever less often, for as long as one stays empty.
export default function ({ setStateValue, data }) {
  const app = document.querySelector('[data-testid="stApp"]');
  const emptyOpen = () => [...document.querySelectorAll(data.boxes)]
    .some((box) => box.open && !box.querySelector('[data-testid="stElementContainer"]'));
  let asks = 0, wait = data.idle_ms, since = performance.now();
  const tick = setInterval(() => {
    const now = performance.now();
    if (!emptyOpen()) {
      wait = data.idle_ms;  // every section filled: a later loss is asked for as soon again
      since = now;
    } else if (!app || app.dataset.testScriptState !== "notRunning") {
      since = now;  // a run under way may be the one that fills it
    } else if (now - since >= wait) {
      setStateValue("asked", ++asks);
      since = now;
      wait = Math.min(2 * wait, 30000);
    }
  }, 500);
  return () => clearInterval(tick);
}
