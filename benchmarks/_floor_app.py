"""The floor of the browser benchmark: the least a Streamlit page with one Plotly chart costs on this machine.

One text box and one Plotly bar chart of its characters; served exactly as the app is (``streamlit run`` from the
repository root, same flags and ``.streamlit/config.toml``), driven by the same input as the app's text pages.
"""

import plotly.graph_objects as go
import streamlit as st

text = st.text_input("Text", "The floor of Streamlit", key="floor_text")
fig = go.Figure(go.Bar(x=list(range(len(text))), y=[ord(c) for c in text], text=list(text)))
fig.update_layout(title="Characters", height=320, margin=dict(l=40, r=10, t=40, b=30))
st.plotly_chart(fig)
