"""How a cell runs in a kernel: one decision of how it ended, one way outputs are built.

Every workspace (JupyterLab's, the headless one, the in-kernel one) and the Python test tab use
this package; see ARCHITECTURE.md, "One execution layer".
"""
