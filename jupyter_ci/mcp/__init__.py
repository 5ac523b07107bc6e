"""jupyter-ci as an MCP server: any agent's hands in the notebook.

One more driver of a :class:`~jupyter_ci.agent.workspace.Workspace`, beside the agent loop
(ARCHITECTURE.md, "The MCP layer"). An outside agent (Claude Code, Codex, Cursor, ...) calls
tools that name a notebook by path; each call that changes the notebook or runs code is a run of
that notebook's conversation, acted out through the tab that has the notebook open in JupyterLab
(:mod:`.live`) or, when none has, on the file with the server's kernel for it (:mod:`.headless`).

- :mod:`.tools`: the tools, their arguments and the calls into the notebooks;
- :mod:`.results`: what each tool returns (structured, with a short text), and its errors;
- :mod:`.notebooks`: a path to its notebook, live or headless, and what each agent added;
- :mod:`.activity`: one tool call's work as a run (its events, review, the cell's execution);
- :mod:`.images`: images bounded in bytes (downscaled, or a resource link);
- :mod:`.service`, :mod:`.http`, :mod:`.asgi`: Streamable HTTP inside the Jupyter server;
- :mod:`.stdio`, :mod:`.local`: ``jupyter ci mcp`` (relay to a server, or headless alone).

Nothing here is imported by ``%load_ext jupyter_ci``; the server imports the SDK on the first
request to the MCP route (or in the background once it started).
"""
