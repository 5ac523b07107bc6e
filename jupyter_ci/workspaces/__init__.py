"""The workspaces: the hands the agent loop acts through (see :mod:`jupyter_ci.agent.workspace`).

- :mod:`jupyter_ci.workspaces.kernel`: a kernel started with jupyter_client plus an ``.ipynb``
  file (headless ``jupyter ci run`` and the Python API).

Each implementation lives in its own module and is imported from there: importing this package
imports none of them, so the light in-kernel workspace never pulls in jupyter_client.
"""
