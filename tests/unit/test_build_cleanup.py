"""What a failed build leaves behind in the engine: a fake engine API streaming the
legacy builder's output; no engine."""

import pytest

from builder.core.errors import BuildError
from builder.engine import BuildRequest, DockerEngine, ProgressMode


class StepAPI:
    """An engine API that streams a legacy build failing at its last step and records
    which images the builder removes."""

    def __init__(self):
        self.removed: list[str] = []

    def build(self, **kw):
        cached = not kw["nocache"]
        yield {"stream": "Step 1/4 : FROM base:1\n"}
        yield {"stream": " ---> 1111111111aa\n"}
        for n, image in ((2, "2222222222bb"), (3, "3333333333cc")):
            yield {"stream": f"Step {n}/4 : ENV A={n}\n"}
            yield {"stream": " ---> Using cache\n" if cached else " ---> Running in 99999999999%d\n" % n}
            yield {"stream": f" ---> {image}\n"}
        yield {"stream": "Step 4/4 : RUN false\n"}
        yield {"error": "The command '/bin/sh -c false' returned a non-zero code: 1"}

    def remove_container(self, cid, force=False):
        pass

    def remove_image(self, image, force=False, noprune=False):
        assert force is False and noprune is True
        self.removed.append(image)


@pytest.mark.parametrize("nocache,removed", [(True, ["3333333333cc", "2222222222bb"]), (False, [])])
def test_a_failed_no_cache_build_removes_only_its_own_step_images(tmp_path, nocache, removed):
    """The legacy builder takes the newest matching image as a cache hit: a --no-cache
    build that fails leaves no half chain for later builds to branch off. The base (FROM)
    and images a cached build merely reused are never removed."""
    engine = object.__new__(DockerEngine)
    engine.api = StepAPI()
    with pytest.raises(BuildError):
        engine.build(BuildRequest(context=tmp_path, nocache=nocache, progress=ProgressMode.QUIET))
    assert engine.api.removed == removed
