"""The command line: typer commands (main.py) that parse options, hand them to a plan and
its run, and print; option definitions, the process edge, `doctor` and the reference pages."""
