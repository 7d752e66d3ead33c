"""Command line: ``pinmon [COMMAND]``.

``main.py`` builds the parser from the command modules, dispatches and maps errors to exit codes;
``parser.py`` is the argparse subclass (one-line errors, negative values, a traced command's
arguments left alone); ``options.py`` declares the options several commands share and settles
their values once (``settings.py``'s ``Settings``); ``common.py`` holds what more than one command uses (config,
advice, argument types, ``UsageError``); ``commands/`` has one module per command. ``main`` here is the console script's entry point
(``pinmon = "pinmon.cli:main"``) and ``python -m pinmon``'s. It is the function, so the attribute
``pinmon.cli.main`` names the function too: reach the module with ``from pinmon.cli.main import ...``.
"""
from .main import main

__all__ = ["main"]
