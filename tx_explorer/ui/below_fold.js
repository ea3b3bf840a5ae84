// The placeholder of a section below the first screen: reports when it comes near the view (tx_explorer/ui/below_fold.py).
function settled() {  // the app has run (script state running → notRunning), or 5 s have passed
  return new Promise((done) => {
    const app = document.querySelector('[data-testid="stApp"]');
    let ran = false;
    const watch = new MutationObserver(() => {
      if (app.dataset.testScriptState !== "notRunning") ran = true;
      else if (ran) finish();
    });
    const timer = setTimeout(finish, 5000);
    function finish() { watch.disconnect(); clearTimeout(timer); done(); }
    if (app) watch.observe(app, { attributes: true, attributeFilter: ["data-test-script-state"] });
    else finish();
  });
}

export default function ({ setStateValue, parentElement, data }) {
  const target = parentElement.querySelector(".box");
  target.style.height = `${data.height}px`;  // about the section's own height: the page does not jump
  target.textContent = data.caption;
  // The page scrolls inside Streamlit's main area, which clips what is below it: that area is the root.
  let root = (parentElement.host || parentElement).parentElement;
  while (root && !/(auto|scroll)/.test(getComputedStyle(root).overflowY)) root = root.parentElement;
  let visible = false, mounted = true, waiting = false, reports = 0, retry = 1000;
  const report = () => {
    if (waiting) return;
    waiting = true;
    window.__txReached = (window.__txReached || Promise.resolve()).then(async () => {
      waiting = false;
      if (!mounted || !(visible || reports)) return;  // once reached, drawn even if scrolled past since
      try {
        setStateValue("reached", ++reports);
        await settled();
      } finally {
        // Still here: the run has not drawn the section yet (a busy server, an interrupted run, a report lost when
        // it came during a run). Ask again, ever less often (1 s, 2 s, … 30 s), also when the visitor has scrolled
        // on past it: a section reached must not stay a box.
        if (mounted) setTimeout(report, retry);
        retry = Math.min(2 * retry, 30000);
      }
    }).catch(() => {});  // a report that failed must not stop the page's later ones (they wait on this chain)
  };
  const io = new IntersectionObserver((entries) => {
    visible = entries[entries.length - 1].isIntersecting;
    report();
  }, { root, rootMargin: `0px 0px ${data.margin} 0px` });
  io.observe(target);
  return () => { mounted = false; io.disconnect(); };
}
