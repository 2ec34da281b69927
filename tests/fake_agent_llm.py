"""A scripted local LLM server that drives a tool-calling agent, for tests (stdlib only).

It answers both protocols agent SDKs speak: OpenAI chat completions (``POST
/v1/chat/completions``) and Anthropic messages (``POST /v1/messages``). Each client gets a
session (``session_url(name)``: a path prefix), and each request in a session is the agent's
next turn: while scripted queries remain, the answer is a ``run_sql`` tool call
(``{"query": SQL}``), then the final answer text. Turns are counted per session, not read
from the conversation, because SDKs resend it in their own shapes (smolagents merges a tool's
error into the user message). When the request offers a ``final_answer`` tool (smolagents'
tool-calling agent ends that way), the final answer is a call to it instead.

    with FakeAgentLLM(["SELECT bad", "SELECT count(*) FROM patients"], "39") as llm:
        client = openai.OpenAI(base_url=llm.session_url("a") + "/v1", api_key="k")
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

__all__ = ["FakeAgentLLM"]

MODEL = "fake-sql-model"


class FakeAgentLLM:
    def __init__(self, queries: list[str], answer: str) -> None:
        self.queries = list(queries)
        self.answer = answer
        self.requests: list[dict[str, Any]] = []
        self._turns: dict[str, int] = {}
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def session_url(self, name: str) -> str:
        """The base URL of one client's session (its turns are counted apart)."""
        return f"{self.base_url}/s/{name}"

    def _turn(self, session: str) -> int:
        with self._lock:
            turn = self._turns.get(session, 0)
            self._turns[session] = turn + 1
            return turn

    def __enter__(self) -> FakeAgentLLM:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._server.shutdown()
        self._server.server_close()

    # ------------------------------------------------------------------ the two protocols

    def chat(self, body: dict[str, Any], turn: int) -> dict[str, Any]:
        tools = {t.get("function", {}).get("name") for t in body.get("tools") or []}
        message: dict[str, Any] = {"role": "assistant", "content": None}
        if turn < len(self.queries):
            message["tool_calls"] = [self._openai_call(turn, "run_sql",
                                                       {"query": self.queries[turn]})]
            finish = "tool_calls"
        elif "final_answer" in tools:
            message["tool_calls"] = [self._openai_call(turn, "final_answer",
                                                       {"answer": self.answer})]
            finish = "tool_calls"
        else:
            message["content"] = self.answer
            finish = "stop"
        return {"id": f"chatcmpl-{turn}", "object": "chat.completion", "created": 1_700_000_000,
                "model": body.get("model") or MODEL,
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": {"prompt_tokens": 100 + 10 * turn, "completion_tokens": 20,
                          "total_tokens": 120 + 10 * turn}}

    @staticmethod
    def _openai_call(turn: int, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return {"id": f"call_{turn}", "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments)}}

    def messages(self, body: dict[str, Any], turn: int) -> dict[str, Any]:
        if turn < len(self.queries):
            content: list[dict[str, Any]] = [
                {"type": "text", "text": "Let me query the database."},
                {"type": "tool_use", "id": f"toolu_{turn}", "name": "run_sql",
                 "input": {"query": self.queries[turn]}}]
            stop = "tool_use"
        else:
            content = [{"type": "text", "text": self.answer}]
            stop = "end_turn"
        return {"id": f"msg_{turn}", "type": "message", "role": "assistant",
                "model": body.get("model") or MODEL, "content": content, "stop_reason": stop,
                "stop_sequence": None,
                "usage": {"input_tokens": 100 + 10 * turn, "output_tokens": 20}}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                path, session = self.path.rstrip("/"), ""
                if path.startswith("/s/"):
                    session, _, rest = path[3:].partition("/")
                    path = "/" + rest
                fake.requests.append({"path": path, "session": session, "body": body})
                if body.get("stream"):
                    self._send(400, {"error": {"message": "streaming is not scripted"}})
                elif path.endswith("/chat/completions"):
                    self._send(200, fake.chat(body, fake._turn(session + " chat")))
                elif path.endswith("/messages"):
                    self._send(200, fake.messages(body, fake._turn(session + " messages")))
                else:
                    self._send(404, {"error": {"message": f"no route {self.path}"}})

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler
