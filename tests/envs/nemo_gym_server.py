"""NeMo Gym resource servers for tests/envs/test_nemo_gym_env.py, built with NeMo Gym's own classes and run by the
Python that has ``nemo-gym`` (its own venv: NeMo Gym needs Python >= 3.12 and pins openai and mcp below vLLM's):

    .venv-nemo-gym/bin/python tests/envs/nemo_gym_server.py {guess|counter} PORT

``guess``: a number-guessing server written here (``SimpleResourcesServer``: a per-session secret from
``/seed_session``, a ``guess`` tool, a ``slow`` tool that answers after 30 s, a ``broken`` tool that fails, and a
``/verify`` that reads the function calls of the episode's Responses-API ``response``; a row's ``seed_delay`` /
``verify_delay`` make ``/seed_session`` / ``/verify`` answer that many seconds late, its ``verify_fails`` makes
``/verify`` fail with HTTP 500). ``counter``: NeMo Gym's own
``example_session_state_mgmt`` server, as shipped in its wheel. Served as ``run_webserver`` serves one (the liveness
route, the app) by uvicorn on 127.0.0.1, without NeMo Gym's head server and Ray.
"""

from __future__ import annotations

import asyncio
import sys

import uvicorn
from fastapi import FastAPI, HTTPException, Request
from nemo_gym.base_resources_server import (
    BaseResourcesServerConfig,
    BaseSeedSessionRequest,
    BaseSeedSessionResponse,
    BaseVerifyRequest,
    BaseVerifyResponse,
    SimpleResourcesServer,
)
from nemo_gym.config_types import BaseServerConfig
from nemo_gym.server_utils import SESSION_ID_KEY, ServerClient
from omegaconf import OmegaConf
from pydantic import BaseModel, Field


class GuessSeedRequest(BaseSeedSessionRequest):
    secret: int
    seed_delay: float = 0.0


class GuessRequest(BaseModel):
    number: int


class GuessVerifyRequest(BaseVerifyRequest):
    secret: int
    verify_delay: float = 0.0
    verify_fails: bool = False


class GuessVerifyResponse(BaseVerifyResponse):
    num_guesses: int
    response_calls: int


class GuessServer(SimpleResourcesServer):
    config: BaseResourcesServerConfig
    secrets: dict[str, int] = Field(default_factory=dict)
    guesses: dict[str, list[int]] = Field(default_factory=dict)

    def setup_webserver(self) -> FastAPI:
        app = super().setup_webserver()
        app.post("/guess")(self.guess)
        app.post("/slow")(self.slow)
        app.post("/broken")(self.broken)
        return app

    async def seed_session(self, request: Request, body: GuessSeedRequest) -> BaseSeedSessionResponse:
        session = request.session[SESSION_ID_KEY]
        await asyncio.sleep(body.seed_delay)
        self.secrets[session], self.guesses[session] = body.secret, []
        return BaseSeedSessionResponse()

    async def guess(self, request: Request, body: GuessRequest) -> dict:
        session = request.session[SESSION_ID_KEY]
        if session not in self.secrets:
            raise HTTPException(status_code=400, detail="no session: call /seed_session first")
        self.guesses[session].append(body.number)
        secret = self.secrets[session]
        return {"result": "correct" if body.number == secret else "higher" if body.number < secret else "lower"}

    async def slow(self) -> dict:
        await asyncio.sleep(30)
        return {"result": "late"}

    async def broken(self) -> dict:
        raise HTTPException(status_code=500, detail="the tool's backend is down")

    async def verify(self, request: Request, body: GuessVerifyRequest) -> GuessVerifyResponse:
        await asyncio.sleep(body.verify_delay)
        if body.verify_fails:
            raise HTTPException(status_code=500, detail="the grader is down")
        session = request.session[SESSION_ID_KEY]
        guesses = self.guesses.get(session, [])
        # the episode as the agent reports it: its function calls must be the guesses this session saw
        calls = [item for item in body.response.output if item.type == "function_call" and item.name == "guess"]
        solved = bool(guesses) and guesses[-1] == body.secret and len(calls) == len(guesses)
        return GuessVerifyResponse(**body.model_dump(), reward=float(solved), num_guesses=len(guesses),
                                   response_calls=len(calls))


def build(kind: str) -> SimpleResourcesServer:
    config = BaseResourcesServerConfig(host="127.0.0.1", port=0, entrypoint="app.py", name=f"test_{kind}")
    # a resource server that calls no other server never uses its client: one pointing at no head server
    client = ServerClient(head_server_config=BaseServerConfig(host="127.0.0.1", port=1),
                          global_config_dict=OmegaConf.create({}))
    if kind == "guess":
        return GuessServer(config=config, server_client=client)
    from resources_servers.example_session_state_mgmt.app import (
        StatefulCounterResourcesServer,
        StatefulCounterResourcesServerConfig,
    )

    return StatefulCounterResourcesServer(
        config=StatefulCounterResourcesServerConfig(**config.model_dump()), server_client=client)


if __name__ == "__main__":
    kind, port = sys.argv[1], int(sys.argv[2])
    server = build(kind)
    app = server.setup_webserver()
    server.setup_liveness(app)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", timeout_graceful_shutdown=0.5)
