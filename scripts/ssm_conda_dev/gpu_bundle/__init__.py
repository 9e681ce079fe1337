"""The GPU check for a bare GPU node: the bundle made here (command.py) and the runner it carries (runner.py)."""
