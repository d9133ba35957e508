"""``tether serve``: the LangGraph Agent Server API over tether's runtime.

:func:`create_app` builds a FastAPI app that answers the routes the official
``langgraph_sdk`` client calls (assistants, threads, runs, streaming) from a
:class:`~tether.runtime.Runtime`, so an SDK client works against tether
unchanged. Runs are executed by workers: in-process ones started with the app,
or ``tether worker`` processes on the same run store.

Requires the ``server`` extra (``pip install 'tether[server]'``).
"""

from tether.server._app import TetherApp, create_app

__all__ = ["TetherApp", "create_app"]
