"""The one package that imports Streamlit: pages are thin scripts over it, ``from tx_explorer import ui``.

One module per concern, everything a page uses re-exported here (``ui.show(...)``):

- :mod:`~tx_explorer.ui.text`: the visitor's language, the page's strings in it, errors as messages;
- :mod:`~tx_explorer.ui.pickers`: the device, the shared models, the text-model picker, the sidebar;
- :mod:`~tx_explorer.ui.figures`: charts with their numbers as downloads, rows, metrics;
- :mod:`~tx_explorer.ui.inputs`: a declared section's inputs as widgets (:mod:`tx_explorer.views.inputs`);
- :mod:`~tx_explorer.ui.sections`: section headers, sections opened on demand, stopping a run;
- :mod:`~tx_explorer.ui.jobs`: long jobs waited for with a progress bar, once per server or when asked;
- :mod:`~tx_explorer.ui.below_fold`: sections drawn when the visitor scrolls near them;
- :mod:`~tx_explorer.ui.visits`: a session's first run in order of arrival, "busy, you are n-th" meanwhile;
- :mod:`~tx_explorer.ui.url_state`: the language and each page's main choices kept in the URL's query string.

Streamlit's private API is used only in :mod:`tx_explorer.ui.compat`, which checks its version.
"""

# Whole, under this package's import lock and before any page draws: Plotly's validators look pandas up in
# sys.modules without importing it, and a page's first run imports it, so a chart drawn while another session's run
# was halfway through that import failed ("partially initialized module 'pandas'", 30 sessions opening at once).
import pandas  # noqa: F401

# First of the package: importing compat leaves Streamlit's legacy multipage mode (a plain ``streamlit run app.py``'s
# first runs, see compat.leave_legacy_multipage_mode).
from tx_explorer.ui import compat  # noqa: F401
from tx_explorer.ui.below_fold import DRAW_ALL, REACH, below_fold, fold_again
from tx_explorer.ui.figures import (
    PAGE_PX,
    literal_table,
    metrics,
    redraw,
    row,
    show,
    show_clickable,
    show_figure,
    show_result,
)
from tx_explorer.ui.inputs import file_uploader, inputs, multiselect, select_or_none
from tx_explorer.ui.jobs import job_on_click, leave_live_runs, live_training, once_per_server, remembered_job, run_job
from tx_explorer.ui.pickers import (
    FOLDER,
    architecture_caption,
    bundled,
    cached_model,
    device,
    sidebar,
    text_model_picker,
)
from tx_explorer.ui.sections import (
    keep_inputs,
    keep_open,
    keep_within,
    lazy_section,
    optional,
    section,
    stop_unless,
)
from tx_explorer.ui.text import escape_markdown, friendly_errors, lang, model_description, page_title, texts
from tx_explorer.ui.url_state import kept_in_url
from tx_explorer.ui.visits import first_visit

__all__ = [
    "DRAW_ALL",
    "FOLDER",
    "PAGE_PX",
    "REACH",
    "architecture_caption",
    "below_fold",
    "bundled",
    "cached_model",
    "device",
    "escape_markdown",
    "file_uploader",
    "first_visit",
    "fold_again",
    "friendly_errors",
    "inputs",
    "job_on_click",
    "keep_inputs",
    "keep_open",
    "keep_within",
    "kept_in_url",
    "lang",
    "lazy_section",
    "leave_live_runs",
    "literal_table",
    "live_training",
    "metrics",
    "model_description",
    "multiselect",
    "once_per_server",
    "optional",
    "page_title",
    "redraw",
    "remembered_job",
    "row",
    "run_job",
    "section",
    "select_or_none",
    "show",
    "show_clickable",
    "show_figure",
    "show_result",
    "sidebar",
    "stop_unless",
    "text_model_picker",
    "texts",
]

from tx_explorer.ui import heads  # noqa: F401 (ui.heads: the multi-head page's head search; after compat)
