"""``jupyter ci bench``: measure the agent on data-analysis questions with checkable answers.

- :mod:`.tasks` loads tasks in the DABench format (``questions.jsonl`` + ``labels.jsonl`` +
  ``tables/``) and picks a seeded sample of them.
- :mod:`.scoring` extracts ``@name[value]`` answers from what the agent produced and scores them.
- :mod:`.runner` runs each task in a fresh notebook and kernel and appends a JSON line per task.
- :mod:`.report` turns those lines into the summary figures.
- :mod:`.suite` is our own small suite, its data and labels generated at run time.
"""

from __future__ import annotations
