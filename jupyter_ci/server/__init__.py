"""The Jupyter server extension: configuration, HTTP and websocket handlers, runs."""
