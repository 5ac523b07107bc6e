"""Every URL jupyter-ci's labextension builds is under the server's base URL.

``.ci/run`` runs the JupyterLab-path browser tests once more with the servers under ``/prefix/``
(``JUPYTER_CI_TEST_BASE_URL``, read by ``start_lab``), as behind a proxy or JupyterHub; this
test checks that the page really is served there and that jupyter-ci's requests and websocket
follow it (a URL built without the base URL would miss the server).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from .chat import open_chat
from .lab import Lab, base_url
from .notebooks import open_lab_app, open_notebook, write_notebook


def test_jupyter_cis_requests_and_websocket_are_under_the_base_url(
    model_context: Any, model_lab: Lab
) -> None:
    assert urlsplit(model_lab.url).path == base_url()
    page = model_context.new_page()
    sockets: list[str] = []
    requests: list[str] = []
    page.on("websocket", lambda socket: sockets.append(socket.url))
    page.on("request", lambda request: requests.append(request.url))
    path = write_notebook(model_lab, ["a = 1"])
    open_lab_app(page, model_lab)
    assert page.evaluate("() => window.jupyterapp.serviceManager.serverSettings.baseUrl") == (
        model_lab.url
    )
    open_notebook(page, path)
    open_chat(page)  # it reads /jupyter-ci/status and the notebook's conversation

    ours = [url for url in requests if "jupyter-ci/" in urlsplit(url).path]
    assert any(urlsplit(url).path.endswith("/jupyter-ci/status") for url in ours), requests
    assert all(url.startswith(model_lab.url) for url in ours), ours
    ws = "ws" + model_lab.url[len("http") :]
    our_sockets = [url for url in sockets if "jupyter-ci/ws" in url]
    assert our_sockets, sockets
    assert all(url.startswith(f"{ws}jupyter-ci/ws") for url in our_sockets), our_sockets
    assert model_context.jupyter_ci_errors == []
