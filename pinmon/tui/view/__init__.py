"""What the app shows, without Textual: the ``ViewState`` every widget draws, the session that builds
it (the advisor's history, the graphs' readings, the probes' timing), and the words, cells and rows of
each panel and pop-up as plain data. Nothing here imports Textual or Rich (``tests/test_imports.py``
holds it), so what decides what the user sees is tested without an app."""
