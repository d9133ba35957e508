"""LangGraph's own persistence tests, run against tether's checkpointers.

The tests are not kept in this repository: :mod:`tests.langgraph_suite.source`
fetches the released sdist of the installed LangGraph version, and
:mod:`tests.langgraph_suite.plugin` points its checkpointer fixtures at
``open_checkpointer`` / ``open_checkpointer_sync``. See docs/checkpointing.md.
"""
