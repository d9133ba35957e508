"""Edit a thread's step log in raw storage, bypassing tether, as someone with database access would.

One editor per backend, each changing the stored text, the chain entry, or
whole rows of ``tether_steps`` / ``tether_step_chain`` (Redis: the
``steps``, ``stepchain`` and ``stephead`` keys).
"""

from __future__ import annotations

from typing import Any

from tests.backends import Backend
from tether.checkpointing._delegating import innermost
from tether.store import store_for


class RawSteps:
    """The raw step log of one test's backend."""

    def __init__(self, backend: Backend, saver: Any) -> None:
        self.backend = backend
        self.inner = innermost(saver)
        self.driver: Any = store_for(self.inner).driver

    async def text(self, thread: str, index: int) -> str:
        """The stored text (an envelope when encrypted) of one step."""
        rows = {r.index: r for r in await self.driver.chain(thread)}
        text = rows[index].text
        assert text is not None
        return text

    async def entry(self, thread: str, index: int) -> tuple[str, str]:
        """The stored ``(digest, link)`` of one step."""
        rows = {r.index: r for r in await self.driver.chain(thread)}
        assert rows[index].digest is not None
        assert rows[index].link is not None
        return rows[index].digest, rows[index].link  # type: ignore[return-value]

    async def sql(self, statements: list[tuple[str, tuple[Any, ...]]]) -> None:
        """Run SQL (with ``?`` placeholders) on the SQLite or PostgreSQL database."""
        if self.backend.name == "sqlite":
            for sql, params in statements:
                await self.inner.conn.execute(sql, params)
            await self.inner.conn.commit()
            return
        import psycopg

        async with await psycopg.AsyncConnection.connect(self.backend.url, autocommit=True) as c:
            for sql, params in statements:
                await c.execute(sql.replace("?", "%s"), params)

    async def redis(self, *commands: tuple[Any, ...]) -> None:
        from redis.asyncio import Redis

        client = Redis.from_url(self.backend.url)
        try:
            for command in commands:
                await client.execute_command(*command)
        finally:
            await client.aclose()

    def _keys(self, thread: str) -> tuple[str, str, str]:
        p = self.driver._p
        return f"{p}:steps:{thread}", f"{p}:stepchain:{thread}", f"{p}:stephead:{thread}"

    async def set_text(self, thread: str, index: int, text: str) -> None:
        """Overwrite a step's stored text."""
        name = self.backend.name
        if name == "memory":
            _, run = self.driver._steps[thread][index]
            self.driver._steps[thread][index] = (text, run)
        elif name == "redis":
            await self.redis(("HSET", self._keys(thread)[0], str(index), text))
        else:
            await self.sql(
                [
                    (
                        "UPDATE tether_steps SET value = ? WHERE thread_id = ? AND idx = ?",
                        (text, thread, index),
                    )
                ]
            )

    async def put(self, thread: str, index: int, text: str, entry: tuple[str, str] | None) -> None:
        """Write a step and its chain entry ``(digest, link)``, if any, at ``index``."""
        name = self.backend.name
        if name == "memory":
            self.driver._steps.setdefault(thread, {})[index] = (text, None)
            if entry is not None:
                self.driver._chain.setdefault(thread, {})[index] = entry
        elif name == "redis":
            steps, chain, _ = self._keys(thread)
            commands: list[tuple[Any, ...]] = [("HSET", steps, str(index), text)]
            if entry is not None:
                commands.append(("HSET", chain, str(index), ":".join(entry)))
            await self.redis(*commands)
        else:
            statements: list[tuple[str, tuple[Any, ...]]] = [
                (
                    "INSERT INTO tether_steps (thread_id, idx, value) VALUES (?, ?, ?)",
                    (thread, index, text),
                )
            ]
            if entry is not None:
                statements.append(
                    (
                        "INSERT INTO tether_step_chain (thread_id, idx, digest, link) "
                        "VALUES (?, ?, ?, ?)",
                        (thread, index, *entry),
                    )
                )
            await self.sql(statements)

    async def delete(self, thread: str, index: int) -> None:
        """Delete a step and its chain entry."""
        name = self.backend.name
        if name == "memory":
            del self.driver._steps[thread][index]
            del self.driver._chain[thread][index]
        elif name == "redis":
            steps, chain, _ = self._keys(thread)
            await self.redis(("HDEL", steps, str(index)), ("HDEL", chain, str(index)))
        else:
            await self.sql(
                [
                    (f"DELETE FROM {table} WHERE thread_id = ? AND idx = ?", (thread, index))
                    for table in ("tether_steps", "tether_step_chain")
                ]
            )

    async def drop_chain(self, thread: str) -> None:
        """Remove every chain entry of the thread: its log looks written before the chain."""
        name = self.backend.name
        if name == "memory":
            self.driver._chain.pop(thread, None)
        elif name == "redis":
            _, chain, head = self._keys(thread)
            await self.redis(("DEL", chain, head))
        else:
            await self.sql([("DELETE FROM tether_step_chain WHERE thread_id = ?", (thread,))])
