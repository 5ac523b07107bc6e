"""The Lab path, server side: runs driven over the websocket by a Python tab, real kernels."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from jupyter_ci.server.app import JupyterCIServer
from jupyter_ci.testing import Reply, ScriptedModelServer
from jupyter_ci.testing.lab_tab import ScriptedTab, code_cell

from .support import exported, finished, start_request

TabFactory = Callable[..., ScriptedTab]
KernelStarter = Callable[[], Awaitable[str]]


async def open_tab(
    tab_factory: TabFactory, kernel_id: str, path: str = "a.ipynb", **kwargs: Any
) -> ScriptedTab:
    tab = tab_factory(**kwargs)
    tab.open_notebook(path, kernel_id, [code_cell("x = 1", "c0")])
    hello = await tab.connect()
    assert hello is not None
    assert hello["ok"] is True
    return tab


async def test_a_whole_run_with_a_fix(
    app: JupyterCIServer,
    model_server: ScriptedModelServer,
    start_kernel: KernelStarter,
    tab_factory: TabFactory,
) -> None:
    model_server.set_script(
        [
            Reply.code('value = data["petal_len"]\nprint(value)'),
            Reply.code('value = data["petal_length"]\nprint(value)'),
            Reply.text("value holds the petal length."),
        ]
    )
    kernel_id = await start_kernel()
    tab = await open_tab(tab_factory, kernel_id)
    await tab.run_user_cell("a.ipynb", 'data = {"petal_length": 4.5}')
    reply = await tab.request(start_request("a.ipynb", kernel_id, "read the petal length"))
    assert reply["ok"] is True
    assert reply["position"] == 0
    run_id = reply["run_id"]
    end = await tab.wait_for_event(finished, run_id, timeout=120)
    assert end["state"] == "done", end
    assert end["summary"]["cells"] == 1
    assert end["summary"]["attempts"] == 2
    # The generated cell is in the tab's notebook with the fixed code and its output.
    notebook = tab.notebooks["a.ipynb"]
    generated = [c for c in notebook.cells if "jupyter_ci" in c["metadata"]]
    assert len(generated) == 1
    assert generated[0]["source"] == 'value = data["petal_length"]\nprint(value)'
    assert generated[0]["outputs"][0]["text"] == "4.5\n"
    assert generated[0]["metadata"]["jupyter_ci"]["run_id"] == run_id
    # Events: in order, numbered 1, 2, 3, ..., through the states of a fixed run.
    events = tab.events(run_id)
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    states = [e["state"] for e in events if e["type"] == "state"]
    assert states[:4] == ["generating", "executing", "fixing", "executing"]
    assert states[-1] == "done"
    updated = [e for e in events if e["type"] == "cell_updated" and e["attempt"] == 2]
    assert updated
    assert '-value = data["petal_len"]' in updated[0]["diff"]
    # The model saw the KeyError inside the untrusted-data wrapper, and the kernel's variables.
    fix_request = model_server.chat_requests[1].body["messages"][-1]["content"]
    assert "KeyError" in fix_request
    assert "petal_len" in fix_request
    first = model_server.chat_requests[0].body["messages"][-1]["content"]
    assert "data" in first
    assert "x = 1" in first
    # Every call named the notebook and went to this tab only; none was answered twice.
    calls = [m for m in tab.received if "method" in m]
    assert {c["notebook_path"] for c in calls} == {"a.ipynb"}
    assert {c["method"] for c in calls} >= {"read_cells", "insert_cell", "run_cell"}
    assert all(count == 1 for count in tab.calls_seen.values())
    # The model's context reads the outputs; a read for ids or sources only asks for none.
    reads = [c for c in calls if c["method"] == "read_cells"]
    assert any("outputs" not in c for c in reads)
    assert any(c.get("outputs") is False for c in reads)
    # The conversation store has the run with its generated cell's final source hash.
    from jupyter_ci.server.store import source_hash

    record = None
    for _ in range(100):
        record = await app.store.run(run_id)
        if record is not None and record.is_finished and record.cells:
            break
        await asyncio.sleep(0.05)
    assert record is not None
    assert record.state == "done"
    assert record.cell_hashes == [(generated[0]["id"], source_hash(generated[0]["source"]))]
    conversation = await app.store.conversation_for("a.ipynb")
    texts = [(m.role, m.text) for m in await app.store.messages(conversation.id)]
    assert ("user", "read the petal length") in texts
    assert ("assistant", "value holds the petal length.") in texts


async def test_the_next_request_continues_the_conversation(
    app: JupyterCIServer,
    model_server: ScriptedModelServer,
    start_kernel: KernelStarter,
    tab_factory: TabFactory,
) -> None:
    model_server.set_script([Reply.text("First answer."), Reply.text("Second answer.")])
    kernel_id = await start_kernel()
    tab = await open_tab(tab_factory, kernel_id)
    for prompt in ("first question", "second question"):
        reply = await tab.request(start_request("a.ipynb", kernel_id, prompt))
        await tab.wait_for_event(finished, reply["run_id"], timeout=60)
    second = model_server.chat_requests[1].body["messages"]
    contents = [m["content"] for m in second]
    assert "first question" in contents
    assert "First answer." in contents
    assert "second question" in contents[-1]


async def test_an_own_fix_in_the_lab_path_and_its_export(
    app: JupyterCIServer,
    model_server: ScriptedModelServer,
    start_kernel: KernelStarter,
    tab_factory: TabFactory,
    jp_fetch: Any,
) -> None:
    # The server reads the kernel's facts through its own client; the tab writes the fix.
    spaced = "import pandas as pd\nw = pd.DataFrame({' A': [1, 2]})\nprint(w['A'].sum())"
    model_server.set_script([Reply.code(spaced), Reply.text("The sum is 3.")])
    kernel_id = await start_kernel()
    tab = await open_tab(tab_factory, kernel_id)
    reply = await tab.request(start_request("a.ipynb", kernel_id, "sum of A"))
    end = await tab.wait_for_event(finished, reply["run_id"], timeout=60)
    assert (end["state"], end["reason"]) == ("done", "answered")
    assert len(model_server.chat_requests) == 2  # no model call for the fix
    cell = tab.notebooks["a.ipynb"].cells[-1]
    fixed = spaced.replace("w['A']", "w[' A']")
    assert cell["source"] == fixed
    text = await exported(jp_fetch, "a.ipynb", end["text"])
    author = "_jupyter-ci fixed the cell itself, without the model or an attempt:_"
    told = f"{author}\n\n```python\n{fixed}"
    assert told in text, text
    assert "Fixed without asking the model: wrote 'A' as ' A', as the frame spells it" in text


async def test_stop_during_a_long_cell(
    app: JupyterCIServer,
    model_server: ScriptedModelServer,
    start_kernel: KernelStarter,
    tab_factory: TabFactory,
) -> None:
    code = "print('sleeping', flush=True)\nimport time\ntime.sleep(600)"
    model_server.set_script([Reply.code(code), Reply.text("never")])
    kernel_id = await start_kernel()
    tab = await open_tab(tab_factory, kernel_id)
    reply = await tab.request(start_request("a.ipynb", kernel_id, "wait a long time"))
    run_id = reply["run_id"]

    def sleeping() -> bool:
        cells = tab.notebooks["a.ipynb"].cells
        outputs = [o for c in cells if "jupyter_ci" in c["metadata"] for o in c["outputs"]]
        return any("sleeping" in str(o.get("text", "")) for o in outputs)

    # Stop once the cell's own code runs (an interrupt before it ends the request otherwise).
    await tab.wait_until(sleeping)
    stopped = await tab.request({"request": "stop_run", "run_id": run_id})
    assert stopped["ok"] is True
    end = await tab.wait_for_event(finished, run_id, timeout=60)
    assert (end["state"], end["reason"]) == ("stopped", "user")
    cell = next(c for c in tab.notebooks["a.ipynb"].cells if "jupyter_ci" in c["metadata"])
    errors = [o for o in cell["outputs"] if o["output_type"] == "error"]
    assert errors
    assert errors[0]["ename"] == "KeyboardInterrupt"
    assert len(model_server.chat_requests) == 1  # a user stop is never "fixed"
    # The kernel is usable afterwards and the next request works.
    model_server.set_script([Reply.code("print('after')"), Reply.text("ok")])
    again = await tab.request(start_request("a.ipynb", kernel_id, "print after"))
    end = await tab.wait_for_event(finished, again["run_id"], timeout=60)
    assert end["state"] == "done"


async def test_stop_while_the_model_streams(
    app: JupyterCIServer,
    model_server: ScriptedModelServer,
    start_kernel: KernelStarter,
    tab_factory: TabFactory,
) -> None:
    model_server.set_script([Reply.code("x = 1\n" * 200, delay=0.05)])
    kernel_id = await start_kernel()
    tab = await open_tab(tab_factory, kernel_id)
    reply = await tab.request(start_request("a.ipynb", kernel_id, "write slowly"))
    run_id = reply["run_id"]
    await tab.wait_for_event(lambda e: e["type"] == "token", run_id)
    await tab.request({"request": "stop_run", "run_id": run_id})
    end = await tab.wait_for_event(finished, run_id, timeout=30)
    assert (end["state"], end["reason"]) == ("stopped", "user")
    closed = await asyncio.to_thread(model_server.wait_for_close, 10)
    assert closed.client_closed_early


async def test_two_notebooks_on_two_kernels_run_at_once(
    app: JupyterCIServer,
    model_server: ScriptedModelServer,
    start_kernel: KernelStarter,
    tab_factory: TabFactory,
) -> None:
    model_server.set_script(
        [
            Reply.code("import time\ntime.sleep(1)\nprint('one')", match="first"),
            Reply.code("import time\ntime.sleep(1)\nprint('two')", match="second"),
            Reply.text("done", times=None),
        ]
    )
    first_kernel, second_kernel = await start_kernel(), await start_kernel()
    tab = tab_factory()
    tab.open_notebook("one.ipynb", first_kernel)
    tab.open_notebook("two.ipynb", second_kernel)
    await tab.connect()
    one = await tab.request(start_request("one.ipynb", first_kernel, "first"))
    two = await tab.request(start_request("two.ipynb", second_kernel, "second"))
    assert one["position"] == 0
    assert two["position"] == 0
    notice = await tab.wait_for(
        lambda m: (
            m.get("notice") == "runs"
            and {r["run_id"] for r in m["runs"]} == {one["run_id"], two["run_id"]}
        )
    )
    assert {r["notebook_path"] for r in notice["runs"]} == {"one.ipynb", "two.ipynb"}
    ends = [
        await tab.wait_for_event(finished, run, timeout=90)
        for run in (one["run_id"], two["run_id"])
    ]
    assert [e["state"] for e in ends] == ["done", "done"]
    outputs = {
        path: [o["text"] for c in nb.cells for o in c["outputs"] if o["output_type"] == "stream"]
        for path, nb in tab.notebooks.items()
    }
    assert outputs == {"one.ipynb": ["one\n"], "two.ipynb": ["two\n"]}


async def test_a_busy_kernel_queues_magic_requests_and_refuses_panel_ones(
    app: JupyterCIServer,
    model_server: ScriptedModelServer,
    start_kernel: KernelStarter,
    tab_factory: TabFactory,
) -> None:
    model_server.set_script(
        [
            Reply.code("import time\ntime.sleep(2)\nfirst = 1", match="one"),
            Reply.code("second = first + 1\nprint(second)", match="two"),
            Reply.text("done", times=None),
        ]
    )
    kernel_id = await start_kernel()
    tab = await open_tab(tab_factory, kernel_id)
    one = await tab.request(start_request("a.ipynb", kernel_id, "one", origin="magic"))
    two = await tab.request(start_request("a.ipynb", kernel_id, "two", origin="magic"))
    panel = await tab.request(start_request("a.ipynb", kernel_id, "three"))
    assert (one["position"], two["position"]) == (0, 1)
    assert panel["ok"] is False
    assert panel["error"]["code"] == "kernel_busy"
    assert panel["run_id"] == one["run_id"]  # the panel can offer to stop it
    first_end = await tab.wait_for_event(finished, one["run_id"], timeout=90)
    second_end = await tab.wait_for_event(finished, two["run_id"], timeout=90)
    assert first_end["state"] == second_end["state"] == "done"
    # In order: the second run's cell saw the first one's variable.
    assert first_end["time"] <= second_end["time"]
    texts = [o.get("text") for c in tab.notebooks["a.ipynb"].cells for o in c["outputs"]]
    assert "2\n" in texts
    assert len(model_server.chat_requests) == 4  # "three" never reached the model


async def test_a_claimed_handoff_nonce_is_accepted_once(
    app: JupyterCIServer,
    model_server: ScriptedModelServer,
    start_kernel: KernelStarter,
    tab_factory: TabFactory,
) -> None:
    model_server.set_script([Reply.text("hello", times=None)])
    kernel_id = await start_kernel()
    tab = await open_tab(tab_factory, kernel_id)
    nonce = "n" * 24
    request = start_request("a.ipynb", kernel_id, "hi", origin="magic", handoff_nonce=nonce)
    first = await tab.request(request)
    assert first["ok"] is True
    # Another tab cannot take it.
    other = await open_tab(tab_factory, kernel_id)
    claimed = await other.request(request)
    assert claimed["ok"] is False
    assert claimed["error"]["code"] == "handoff_claimed"
    # The tab that took it, asking again (its socket dropped before the reply), gets the same
    # run: no second run starts.
    again = await tab.request(request)
    assert again["ok"] is True
    assert again["run_id"] == first["run_id"]
    end = await tab.wait_for_event(finished, first["run_id"])
    assert end["state"] == "done"
    assert len(model_server.chat_requests) == 1


async def test_a_ci_execute_request_hands_off_once_whatever_its_nonce(
    app: JupyterCIServer,
    model_server: ScriptedModelServer,
    start_kernel: KernelStarter,
    tab_factory: TabFactory,
) -> None:
    # Code in the kernel can display a handoff with a nonce of its own under the header of the
    # %%ci request it found: the server takes one handoff per execute request of a kernel.
    model_server.set_script([Reply.text("hello", times=None)])
    kernel_id = await start_kernel()
    tab = await open_tab(tab_factory, kernel_id)
    requests = [
        start_request(
            "a.ipynb",
            kernel_id,
            "hi",
            origin="magic",
            handoff_nonce=nonce * 24,
            handoff_request_id="msg-of-the-ci-cell",
        )
        for nonce in "nm"
    ]
    first = await tab.request(requests[0])
    assert first["ok"] is True
    forged = await tab.request(requests[1])
    assert (forged["ok"], forged["error"]["code"]) == (False, "handoff_claimed")
    assert "already handed off once" in forged["error"]["message"]
    # The same handoff again (a lost reply) still gets its run.
    again = await tab.request(requests[0])
    assert (again["ok"], again["run_id"]) == (True, first["run_id"])
    end = await tab.wait_for_event(finished, first["run_id"])
    assert end["state"] == "done"
    assert len(model_server.chat_requests) == 1


async def test_a_request_cannot_redirect_the_key(
    app: JupyterCIServer,
    model_server: ScriptedModelServer,
    start_kernel: KernelStarter,
    tab_factory: TabFactory,
) -> None:
    kernel_id = await start_kernel()
    tab = await open_tab(tab_factory, kernel_id)
    for options in (
        {"options": {"api_base": "http://127.0.0.1:9/v1"}},
        {"session_options": {"api_base": "http://127.0.0.1:9/v1"}},
        {"user_options": {"model": "openai/not-configured"}},
    ):
        reply = await tab.request(start_request("a.ipynb", kernel_id, "hi", **options))
        assert reply["ok"] is False, options
        assert reply["error"]["code"] == "config_error"
    assert model_server.chat_requests == []


async def test_review_mode_waits_for_the_users_answer(
    app: JupyterCIServer,
    model_server: ScriptedModelServer,
    start_kernel: KernelStarter,
    tab_factory: TabFactory,
) -> None:
    model_server.set_script([Reply.code("print('model version')"), Reply.text("ok")])
    kernel_id = await start_kernel()
    tab = await open_tab(tab_factory, kernel_id)
    reply = await tab.request(
        start_request("a.ipynb", kernel_id, "print", options={"mode": "review"})
    )
    run_id = reply["run_id"]
    waiting = await tab.wait_for_event(
        lambda e: e["type"] == "state" and e["state"] == "awaiting_approval", run_id
    )
    inserted = next(e for e in tab.events(run_id) if e["type"] == "cell_inserted")
    assert waiting["seq"] > inserted["seq"]
    wrong = await tab.request(
        {
            "request": "review",
            "run_id": run_id,
            "cell_id": "nope",
            "decision": "run",
            "source": None,
        }
    )
    assert wrong["ok"] is False
    assert wrong["error"]["code"] == "not_awaiting_review"
    answer = await tab.request(
        {
            "request": "review",
            "run_id": run_id,
            "cell_id": inserted["cell_id"],
            "decision": "run",
            "source": "print('user version')",
        }
    )
    assert answer["ok"] is True
    end = await tab.wait_for_event(finished, run_id, timeout=60)
    assert end["state"] == "done"
    cell = tab.notebooks["a.ipynb"].cell(inserted["cell_id"])
    assert cell["source"] == "print('user version')"
    assert cell["outputs"][0]["text"] == "user version\n"


async def test_another_tab_on_the_notebook_sees_the_run(
    app: JupyterCIServer,
    model_server: ScriptedModelServer,
    start_kernel: KernelStarter,
    tab_factory: TabFactory,
) -> None:
    model_server.set_script([Reply.code("print(1)"), Reply.text("ok")])
    kernel_id = await start_kernel()
    owner = await open_tab(tab_factory, kernel_id)
    watcher = await open_tab(tab_factory, kernel_id)
    elsewhere = tab_factory()
    elsewhere.open_notebook("other.ipynb", kernel_id)
    await elsewhere.connect()
    reply = await owner.request(start_request("a.ipynb", kernel_id, "print one"))
    run_id = reply["run_id"]
    await owner.wait_for_event(finished, run_id, timeout=60)
    seen = await watcher.wait_for_event(finished, run_id, timeout=10)
    assert seen["state"] == "done"
    # Calls went to the owner only; a tab without the notebook got the run list, not its events.
    assert not [m for m in watcher.received if "method" in m]
    assert not elsewhere.events(run_id)
    notices = [m for m in elsewhere.received if m.get("notice") == "runs"]
    assert any(r["run_id"] == run_id for m in notices for r in m["runs"])


@pytest.mark.parametrize(
    "bad",
    [
        "not json",
        "[1, 2]",
        '{"request": "dance"}',
        # Call replies are checked against their own definitions (the common, cheap case).
        '{"call_id": "k1", "ok": true, "result": {}, "key": "sk-1"}',
        '{"call_id": "k1", "ok": false}',
        '{"call_id": "k1", "progress": "halfway", "started_at": 1.0}',
        '{"call_id": "k1", "ok": true, "result": {}, "request": "hello"}',
    ],
)
async def test_bad_messages_get_an_error_and_keep_the_socket(
    app: JupyterCIServer, start_kernel: KernelStarter, tab_factory: TabFactory, bad: str
) -> None:
    kernel_id = await start_kernel()
    tab = await open_tab(tab_factory, kernel_id)
    tab.send_raw(bad)
    notice = await tab.wait_for(lambda m: m.get("notice") == "error")
    assert notice["error"]["code"] == "bad_message"
    still = await tab.request({"request": "subscribe", "notebook_paths": ["a.ipynb"]})
    assert still["ok"] is True


async def test_rerunning_a_magic_cell_does_not_generate_again_unless_asked(
    app: JupyterCIServer,
    model_server: ScriptedModelServer,
    start_kernel: KernelStarter,
    tab_factory: TabFactory,
) -> None:
    model_server.set_script(
        [Reply.code("a = 1"), Reply.code("b = 2"), Reply.code("a = 1", times=2)]
    )
    kernel_id = await start_kernel()
    tab = await open_tab(tab_factory, kernel_id)
    notebook = tab.notebooks["a.ipynb"]
    magic = start_request(
        "a.ipynb", kernel_id, "first then second", origin="magic", anchor_cell_id="c0"
    )
    first = await tab.request({**magic, "options": {"max_steps": 2}})
    end = await tab.wait_for_event(finished, first["run_id"], timeout=60)
    assert end["summary"]["cells"] == 2
    generated = [c["id"] for c in notebook.cells if "jupyter_ci" in c["metadata"]]
    assert notebook.sources()[1:3] == ["a = 1", "b = 2"]
    requests_so_far = len(model_server.chat_requests)

    # Run the %%ci cell again: its cells are there, so no model call and no new cells.
    again = await tab.request(magic)
    assert again["ok"] is True, again
    assert "run_id" not in again
    assert again["note"] == "Not asked again: its 2 cells are below (--regenerate to replace them)"
    # The last run's status line still stands.
    assert again["status_line"] == end["text"]
    assert again["status_line"].startswith("jupyter-ci: done (reached the step limit) — 2 cells")
    assert len(model_server.chat_requests) == requests_so_far
    assert len(notebook.cells) == 3

    # The user edits the second cell and pastes a copy of the first (a new id: theirs).
    notebook.cell(generated[1])["source"] = "b = 20  # mine"
    notebook.cells.append({**notebook.cell(generated[0]), "id": "pasted"})
    regenerate = await tab.request(
        {**magic, "prompt": "regenerate", "regenerate": True, "options": {"max_steps": 1}}
    )
    assert regenerate["ok"] is True
    assert regenerate["note"] == (
        "Asking again (--regenerate): the 1 cell it left below will be replaced by the new "
        "answer unless you edit it first; 1 cell you edited or ran to install is kept."
    )
    end = await tab.wait_for_event(finished, regenerate["run_id"], timeout=60)
    assert end["state"] == "done"
    notices = [
        e["text"]
        for e in tab.events(regenerate["run_id"])
        if e["type"] == "message" and e["role"] == "notice"
    ]
    assert "Replaced 1 cell of the earlier answer." in notices
    ids = [c["id"] for c in notebook.cells]
    assert generated[0] not in ids  # the unedited generated cell was replaced
    assert generated[1] in ids  # the edited one was kept
    assert "pasted" in ids  # the copy is the user's
    assert notebook.cell(generated[1])["source"] == "b = 20  # mine"
    assert (
        next(m for m in tab.received if m.get("method") == "delete_cell")["cell_id"]
        == (generated[0])
    )

    # All generated cells deleted by the user: the next run generates again.
    notebook.cells = [c for c in notebook.cells if "jupyter_ci" not in c["metadata"]]
    fresh = await tab.request({**magic, "options": {"max_steps": 1}})
    assert "run_id" in fresh
    await tab.wait_for_event(finished, fresh["run_id"], timeout=60)


async def test_rerunning_a_magic_cell_whose_request_failed_asks_again(
    app: JupyterCIServer,
    model_server: ScriptedModelServer,
    start_kernel: KernelStarter,
    tab_factory: TabFactory,
) -> None:
    # The cell, its fix repeating it, that fix asked once more (no attempt used).
    model_server.set_script([Reply.code("1 / 0", times=3), Reply.code("c = 3")])
    kernel_id = await start_kernel()
    tab = await open_tab(tab_factory, kernel_id)
    notebook = tab.notebooks["a.ipynb"]
    magic = start_request(
        "a.ipynb", kernel_id, "divide", origin="magic", anchor_cell_id="c0", options={}
    )
    first = await tab.request({**magic, "options": {"max_attempts": 2}})
    end = await tab.wait_for_event(finished, first["run_id"], timeout=60)
    assert (end["state"], end["reason"]) == ("failed", "max_attempts")
    failed = [c["id"] for c in notebook.cells if "jupyter_ci" in c["metadata"]]
    # Running the %%ci again is asking again, and says so first: the failed cell gives way to
    # the new answer once it comes, not before.
    again = await tab.request({**magic, "options": {"max_steps": 1}})
    assert again["ok"] is True, again
    assert again["note"] == (
        "The last request here failed (the cell still failed at the last attempt): asking "
        "again; the 1 cell it left below will be replaced by the new answer unless you edit it "
        "first."
    )
    assert failed[0] in [c["id"] for c in notebook.cells]
    end = await tab.wait_for_event(finished, again["run_id"], timeout=60)
    assert end["state"] == "done"
    assert failed[0] not in [c["id"] for c in notebook.cells]
    assert notebook.sources()[1:] == ["c = 3"]


async def test_a_failed_cell_the_user_edits_while_the_model_is_asked_again_is_kept(
    app: JupyterCIServer,
    model_server: ScriptedModelServer,
    start_kernel: KernelStarter,
    tab_factory: TabFactory,
) -> None:
    # The model takes a moment to answer: the user reads the failed cell and edits it meanwhile.
    model_server.set_script(
        [Reply.code("1 / 0", times=3), Reply.code("c = 3", latency=1.0), Reply.text("Done.")]
    )
    kernel_id = await start_kernel()
    tab = await open_tab(tab_factory, kernel_id)
    notebook = tab.notebooks["a.ipynb"]
    magic = start_request(
        "a.ipynb", kernel_id, "divide", origin="magic", anchor_cell_id="c0", options={}
    )
    first = await tab.request({**magic, "options": {"max_attempts": 2}})
    await tab.wait_for_event(finished, first["run_id"], timeout=60)
    failed = next(c["id"] for c in notebook.cells if "jupyter_ci" in c["metadata"])
    again = await tab.request({**magic, "options": {"max_steps": 1}})
    assert "will be replaced by the new answer unless you edit it first" in again["note"]
    notebook.cell(failed)["source"] = "1 / 1  # mine now"
    end = await tab.wait_for_event(finished, again["run_id"], timeout=60)
    assert end["state"] == "done"
    assert notebook.cell(failed)["source"] == "1 / 1  # mine now"
    assert "c = 3" in notebook.sources()
    assert not any(m.get("method") == "delete_cell" for m in tab.received)
    notices = [
        e["text"]
        for e in tab.events(again["run_id"])
        if e["type"] == "message" and e["role"] == "notice"
    ]
    assert "Kept the 1 cell of the earlier answer: you edited it meanwhile." in notices


async def test_a_panel_request_placed_after_a_magic_cell_is_never_that_cells_request(
    app: JupyterCIServer,
    model_server: ScriptedModelServer,
    start_kernel: KernelStarter,
    tab_factory: TabFactory,
) -> None:
    # Issue 23: a panel request whose cells went right after a %%ci cell was taken for that
    # %%ci's answer; --regenerate then deleted the panel's cell and kept the %%ci's own.
    model_server.set_script(
        [
            Reply.code("scatter = 1", match="scatter"),
            Reply.code("histogram = 2", match="histogram"),
            Reply.code("scatter = 10", match="again"),
        ]
    )
    kernel_id = await start_kernel()
    tab = await open_tab(tab_factory, kernel_id)
    notebook = tab.notebooks["a.ipynb"]
    magic = start_request(
        "a.ipynb",
        kernel_id,
        "scatter",
        origin="magic",
        anchor_cell_id="c0",
        options={"max_steps": 1},
    )
    first = await tab.request(magic)
    await tab.wait_for_event(finished, first["run_id"], timeout=60)
    ours = next(c["id"] for c in notebook.cells if c["source"] == "scatter = 1")
    # The panel's request goes right after the %%ci cell (the user had selected it).
    panel = await tab.request(
        start_request(
            "a.ipynb", kernel_id, "histogram", anchor_cell_id="c0", options={"max_steps": 1}
        )
    )
    await tab.wait_for_event(finished, panel["run_id"], timeout=60)
    theirs = next(c for c in notebook.cells if c["source"] == "histogram = 2")
    assert notebook.sources() == ["x = 1", "histogram = 2", "scatter = 1"]
    assert theirs["metadata"]["jupyter_ci"]["origin_cell_id"] is None  # not the %%ci's

    # Running the %%ci again: its own cell is below it, the panel's is not its.
    again = await tab.request(magic)
    assert "run_id" not in again, again
    assert again["note"] == "Not asked again: its cell is below (--regenerate to replace it)"
    regenerate = await tab.request({**magic, "prompt": "again", "regenerate": True})
    assert "the 1 cell it left below will be replaced" in regenerate["note"]
    await tab.wait_for_event(finished, regenerate["run_id"], timeout=60)
    assert ours not in [c["id"] for c in notebook.cells]
    assert notebook.sources() == ["x = 1", "scatter = 10", "histogram = 2"]


async def test_rerunning_a_magic_cell_whose_request_still_waits_leaves_it_alone(
    app: JupyterCIServer,
    model_server: ScriptedModelServer,
    start_kernel: KernelStarter,
    tab_factory: TabFactory,
) -> None:
    # Run All again while the %%ci's cell waits for review: found by trying it in JupyterLab,
    # where the cell waiting for review was deleted as if it were a finished request's answer.
    model_server.set_script([Reply.code("d = 4"), Reply.text("Done.")])
    kernel_id = await start_kernel()
    tab = await open_tab(tab_factory, kernel_id)
    notebook = tab.notebooks["a.ipynb"]
    magic = start_request(
        "a.ipynb",
        kernel_id,
        "four",
        origin="magic",
        anchor_cell_id="c0",
        options={"mode": "review"},
    )
    first = await tab.request(magic)
    run_id = first["run_id"]
    await tab.wait_for_event(
        lambda e: e["type"] == "state" and e["state"] == "awaiting_approval", run_id
    )
    waiting = next(e for e in tab.events(run_id) if e["type"] == "cell_inserted")["cell_id"]
    again = await tab.request(magic)
    assert again["ok"] is True, again
    assert again["run_id"] == run_id, again  # the cell follows the run already going
    assert again["note"] == (
        "This %%ci's request is still going: following it, not asking again. Stop it to ask again."
    )
    assert waiting in [c["id"] for c in notebook.cells]
    answer = await tab.request(
        {
            "request": "review",
            "run_id": run_id,
            "cell_id": waiting,
            "decision": "run",
            "source": None,
        }
    )
    assert answer["ok"] is True, answer
    end = await tab.wait_for_event(finished, run_id, timeout=60)
    assert (end["state"], end["reason"]) == ("done", "answered"), end
    assert notebook.cell(waiting)["outputs"] == []  # d = 4 prints nothing, and it ran once
    assert notebook.cell(waiting)["execution_count"] is not None


async def test_the_tab_hears_which_files_the_run_wrote(
    app: JupyterCIServer,
    model_server: ScriptedModelServer,
    start_kernel: KernelStarter,
    tab_factory: TabFactory,
) -> None:
    model_server.set_script(
        [Reply.code("open('made_by_the_run.txt', 'w').write('hello')"), Reply.text("Written.")]
    )
    kernel_id = await start_kernel()
    tab = await open_tab(tab_factory, kernel_id)
    reply = await tab.request(start_request("a.ipynb", kernel_id, "write a file"))
    run_id = reply["run_id"]
    event = await tab.wait_for_event(lambda e: e["type"] == "files", run_id, timeout=120)
    assert event["files"] == [{"path": "made_by_the_run.txt", "change": "created", "size": 5}]
    end = await tab.wait_for_event(finished, run_id, timeout=60)
    assert end["state"] == "done", end
    # The snapshot after the cell came with the cell's own request: no call of its own.
    calls = [m for m in tab.received if m.get("run_id") == run_id and "method" in m]
    methods = [call["method"] for call in calls]
    run_cell = methods.index("run_cell")
    assert "snapshot" in calls[run_cell]["expression"]
    assert "evaluate" not in methods[run_cell + 1 :], methods


async def test_files_written_by_a_cell_that_failed_are_heard_too(
    app: JupyterCIServer,
    model_server: ScriptedModelServer,
    start_kernel: KernelStarter,
    tab_factory: TabFactory,
) -> None:
    # A kernel evaluates user expressions only after a cell that ended well: after this one the
    # snapshot is asked for by a call of its own.
    model_server.set_script(
        [
            Reply.code("open('half_written.txt', 'w').write('abc'); 1 / 0"),
            Reply.code("print('fixed')"),
            Reply.text("Done."),
        ]
    )
    kernel_id = await start_kernel()
    tab = await open_tab(tab_factory, kernel_id)
    reply = await tab.request(start_request("a.ipynb", kernel_id, "write then fail"))
    run_id = reply["run_id"]
    event = await tab.wait_for_event(lambda e: e["type"] == "files", run_id, timeout=120)
    assert event["files"] == [{"path": "half_written.txt", "change": "created", "size": 3}]
    end = await tab.wait_for_event(finished, run_id, timeout=60)
    assert end["state"] == "done", end
    calls = [m for m in tab.received if m.get("run_id") == run_id and "method" in m]
    methods = [call["method"] for call in calls]
    first_run = methods.index("run_cell")
    assert "evaluate" in methods[first_run + 1 :], methods


async def test_the_levers_after_a_failure_in_jupyterlab(
    model_server: ScriptedModelServer,
    start_kernel: KernelStarter,
    tab_factory: TabFactory,
) -> None:
    """The levers, on by default, in a run in the tab: a result that looks wrong is looked at
    again, the fix is asked afresh, at its own temperature (with a temperature set)."""
    nan = "import math\nprint('mean:', math.nan)"
    model_server.set_script(
        [
            Reply.code(nan),
            Reply.code("print('mean:', 4.5)", match="Write this cell again"),
            Reply.text("The mean is 4.5."),
        ]
    )
    kernel_id = await start_kernel()
    tab = await open_tab(tab_factory, kernel_id)
    options = {"temperature": 0}
    request = start_request("a.ipynb", kernel_id, "the mean", options=options)
    reply = await tab.request(request)
    end = await tab.wait_for_event(finished, reply["run_id"], timeout=120)
    assert end["state"] == "done", end
    assert end["summary"]["attempts"] == 2
    events = tab.events(reply["run_id"])
    states = [e["state"] for e in events if e["type"] == "state"]
    assert states[:4] == ["generating", "executing", "fixing", "executing"]
    notices = [e["text"] for e in events if e["type"] == "message" and e["role"] == "notice"]
    assert any(text.startswith("The result looks wrong: a result is NaN") for text in notices)
    fix = model_server.chat_requests[1].body
    assert fix["temperature"] == 0.6  # fix_temperatures' first, by default
    assert [m["role"] for m in fix["messages"]][-2:] == ["user", "user"]
    assert "It ran, but its result looks wrong" in fix["messages"][-1]["content"]
    generated = [c for c in tab.notebooks["a.ipynb"].cells if "jupyter_ci" in c["metadata"]]
    assert generated[0]["outputs"][0]["text"] == "mean: 4.5\n"
