"""JupyterLab for the image's users: installed from the release's lock, with server
settings in /etc/jupyter (jupyter_server_config.py here) so that `jupyter lab` serves
/workspace on $JUPYTER_PORT with the token or password the container is given."""

from __future__ import annotations

from builder.components.pip_tool import PipTool


class Jupyter(PipTool):
    NAME = "jupyter"
    TITLE = "JupyterLab"
    DOC = (
        "JupyterLab from the release's lock, serving /workspace on $JUPYTER_PORT with $JUPYTER_TOKEN or "
        '$JUPYTER_PASSWORD; null or "absent: WHY": none; `--without jupyter` leaves it out.'
    )
    EXAMPLE = {"requirement": "jupyterlab==4.6.6"}
    LABEL = "dev.tfbuilder.jupyter"  # "jupyterlab=4.6.6": what the image's metadata says
    PARTIAL = "core.Dockerfile.j2"
    FILES = ("jupyter_server_config.py",)
    DISTRIBUTIONS = "jupyterlab"


COMPONENT = Jupyter
