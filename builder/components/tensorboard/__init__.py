"""TensorBoard for the image's users, installed from the release's lock (TensorFlow up to
2.15 requires it anyway; 2.16 and later do not): `tensorboard --logdir DIR --bind_all
--port $TENSORBOARD_PORT`."""

from __future__ import annotations

from builder.components.pip_tool import PipTool


class TensorBoard(PipTool):
    NAME = "tensorboard"
    TITLE = "TensorBoard"
    DOC = (
        'TensorBoard from the release\'s lock (served on $TENSORBOARD_PORT); null or "absent: WHY": none; '
        "`--without tensorboard` leaves it out."
    )
    EXAMPLE = {"requirement": "tensorboard==2.11.2"}
    LABEL = "dev.tfbuilder.tensorboard"  # "tensorboard=2.11.2"
    DISTRIBUTIONS = "tensorboard"


COMPONENT = TensorBoard
