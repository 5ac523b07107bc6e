"""The agent: one loop, written once, acting through a :class:`Workspace` and a model.

Nothing in this package imports jupyter_server: the same loop serves JupyterLab (through the
browser), the headless command and the in-kernel magic.
"""
