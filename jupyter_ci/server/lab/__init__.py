"""The loop's hands in JupyterLab: the browser tab that owns a run, reached over the websocket.

:mod:`.calls` carries a run's calls to its tab and their replies; :mod:`.workspace` is the
:class:`~jupyter_ci.agent.workspace.Workspace` built on them; :mod:`.iopub` hears the run's cell
on the kernel's output channel, for a page reloaded while it runs. All belong to the server: the
tab is reached only through the server's websocket.
"""
