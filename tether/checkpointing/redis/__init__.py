"""Redis checkpointer: LangGraph's AsyncRedisSaver, with its conformance gaps closed.

What :class:`RedisSaver` changes, and why (everything else is upstream code):

* ``alist`` treats ``checkpoint_ns=""`` as the root namespace (upstream lists
  every namespace), honours ``before`` for any checkpoint id (upstream only for
  ULIDs, while LangGraph makes UUIDv6 ids) and filters on any metadata key
  (upstream raises for keys other than ``source``, ``step`` and ``run_id``).
* ``aprune`` returns for an empty list, refuses a single ``str`` and keeps the
  latest checkpoint of each namespace with its writes, like upstream Postgres.
* ``adelete_for_runs`` and ``acopy_thread`` exist.
* The per-checkpoint write registry lives under the saver's prefix (upstream
  writes it to ``write_keys_zset:...`` whatever the prefix, so two prefixes read
  each other's pending writes), and ``adelete_thread`` removes every key of the
  thread, writes of unsaved checkpoints included.
* ``aget_tuple`` returns ``None``, not an empty tuple, for a checkpoint whose
  writes came before it, and ``alist`` shows those writes once it is saved.
* Values are serialized as PostgresSaver does (see ``_serde``): objects come
  back as objects; pending writes come back in LangGraph's order; metadata
  holds the config's extra keys.
* ``aput`` saves the document, the latest pointer and expiries in one
  transaction, and ``aget_tuple`` takes the newest checkpoint id, repairing a
  pointer an interrupted upstream save left behind.
* Thread ids, namespaces and run ids match exactly: upstream's TAG queries fold
  case, split on ``,`` and trim spaces (see ``_matching``).
* ``list``, ``delete_thread`` and ``put_writes`` (which upstream calls without
  ``task_path``) bridge to the event loop for sync callers.

Modules: ``_prefixes`` (validating ``key_prefix``, deriving every key
namespace), ``_serde`` (how values are stored), ``_keys`` (the prefixed write
registry), ``_matching`` (exact id searches on TAG fields), ``_base`` (searching,
reading and unlinking documents), ``_reading`` (documents to checkpoint tuples),
``_saving``, ``_listing``, ``_deleting``, ``_pruning``, ``_copying`` (one capability
each), ``_saver`` (the assembled class and its sync twins) and ``_opener``
(connecting, checking modules, validating options).
"""

import importlib

from tether.errors import MissingDependencyError

# Everything the submodules import from the "redis" extra. Checked here, not in
# the submodules: a submodule already imported stays in sys.modules, so only
# this package's own import reliably notices a driver that is gone.
_DRIVERS = (
    "langgraph.checkpoint.redis.aio",
    "langgraph.checkpoint.redis.base",
    "langgraph.checkpoint.redis.key_registry",
    "langgraph.checkpoint.redis.util",
    "redis.asyncio",
    "redis.commands.search.document",
    "redis.exceptions",
    "redisvl.index",
    "redisvl.query",
    "redisvl.query.filter",
)
try:
    for _driver in _DRIVERS:
        importlib.import_module(_driver)
except ImportError as exc:
    raise MissingDependencyError("the Redis checkpointer", "redis") from exc

from tether.checkpointing.redis._opener import open_redis, required_modules  # noqa: E402  # after the check above
from tether.checkpointing.redis._prefixes import move_records, records_prefix  # noqa: E402  # after the check above
from tether.checkpointing.redis._saver import RedisSaver  # noqa: E402  # after the check above

__all__ = ["RedisSaver", "move_records", "open_redis", "records_prefix", "required_modules"]
