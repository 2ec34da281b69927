"""A scripted local LLM server that drives a tool-calling agent, for tests (stdlib only).

It answers both protocols agent SDKs speak: OpenAI chat completions (``POST
/v1/chat/completions``) and Anthropic messages (``POST /v1/messages``). It keeps no state: each
answer follows from the conversation the client sends. While fewer tool results than scripted
queries are in the conversation, it asks for the next query with a ``run_sql`` tool call
(``{"query": SQL}``); then it answers with the final text, which quotes the last tool result,
so a test knows the answer the agent gave. When the request offers a ``final_answer`` tool
(smolagents' tool-calling agent ends that way), the final answer is a call to it instead.

    with FakeAgentLLM(["SELECT bad", "SELECT count(*) FROM patients"]) as llm:
        client = openai.OpenAI(base_url=llm.openai_url, api_key="k")
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

__all__ = ["FakeAgentLLM", "final_text"]

MODEL = "fake-sql-model"


def final_text(last_result: str) -> str:
    """The final answer the server gives after the last tool result."""
    return f"The answer is {last_result.strip()}."


def _text_of(content: Any) -> str:
    """A tool result's text, whichever way the client packed it."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


class FakeAgentLLM:
    def __init__(self, queries: list[str]) -> None:
        self.queries = list(queries)
        self.requests: list[dict[str, Any]] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def openai_url(self) -> str:
        return self.base_url + "/v1"

    def __enter__(self) -> FakeAgentLLM:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._server.shutdown()
        self._server.server_close()

    # ------------------------------------------------------------------ the two protocols

    def chat(self, body: dict[str, Any]) -> dict[str, Any]:
        messages = body.get("messages") or []
        results = [_text_of(m.get("content")) for m in messages if m.get("role") == "tool"]
        turn = len(results)
        tools = {t.get("function", {}).get("name") for t in body.get("tools") or []}
        message: dict[str, Any] = {"role": "assistant", "content": None}
        if turn < len(self.queries):
            message["tool_calls"] = [self._openai_call(turn, "run_sql",
                                                       {"query": self.queries[turn]})]
            finish = "tool_calls"
        elif "final_answer" in tools:
            answer = final_text(results[-1] if results else "")
            message["tool_calls"] = [self._openai_call(turn, "final_answer",
                                                       {"answer": answer})]
            finish = "tool_calls"
        else:
            message["content"] = final_text(results[-1] if results else "")
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

    def messages(self, body: dict[str, Any]) -> dict[str, Any]:
        results = [_text_of(block.get("content"))
                   for m in body.get("messages") or [] if isinstance(m.get("content"), list)
                   for block in m["content"]
                   if isinstance(block, dict) and block.get("type") == "tool_result"]
        turn = len(results)
        if turn < len(self.queries):
            content: list[dict[str, Any]] = [
                {"type": "text", "text": "Let me query the database."},
                {"type": "tool_use", "id": f"toolu_{turn}", "name": "run_sql",
                 "input": {"query": self.queries[turn]}}]
            stop = "tool_use"
        else:
            content = [{"type": "text", "text": final_text(results[-1] if results else "")}]
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
                fake.requests.append({"path": self.path, "body": body})
                if body.get("stream"):
                    self._send(400, {"error": {"message": "streaming is not scripted"}})
                elif self.path.rstrip("/").endswith("/chat/completions"):
                    self._send(200, fake.chat(body))
                elif self.path.rstrip("/").endswith("/messages"):
                    self._send(200, fake.messages(body))
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
