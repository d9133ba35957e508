"""The project's own HTTP routes (``http.app`` in langgraph.json), served beside the API."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

started: list[str] = []


@asynccontextmanager
async def lifespan(_: FastAPI) -> AsyncIterator[None]:
    started.append("up")
    yield


app = FastAPI(lifespan=lifespan)


@app.get("/hello/{name}")
async def hello(name: str) -> dict[str, object]:
    return {"hello": name, "lifespan": started}


@app.get("/info")
async def info() -> dict[str, str]:
    return {"owner": "the project"}  # the project's route wins over the API's
