"""Horovod's conformance tests: the catalog's version, built with TensorFlow, MPI, Gloo and
(with CUDA) NCCL; two processes allreduce under horovodrun and under mpirun, on the CPU, and
train one Keras model with hvd.DistributedOptimizer (the loss falls, the ranks' weights
agree); its binaries carry machine code for each capability asked for; the patches it was
built with are recorded byte for byte."""

from __future__ import annotations

import re
import warnings

import pytest

from builder.components.conformance import held
from builder.components.horovod import Horovod
from builder.core.contract import Label


def requested(labels) -> list[str]:
    return [a for a in labels[Label.CUDA_COMPUTE_CAPABILITIES].split(",") if a]


def digits(archs) -> list[str]:
    return sorted({a.replace(".", "") for a in archs}, key=int)


@pytest.fixture(scope="module")
def horovod(report, release_data, labels):
    return held(Horovod, report, release_data, labels)


def test_horovod_is_the_catalogs_and_labelled(horovod, release_data, labels):
    assert Horovod.problems(release_data[0].components[Horovod.NAME], horovod) == []
    assert labels[Horovod.LABEL] == Horovod.versions_text(horovod)


# One pre-formatted write per rank, so the two ranks' lines cannot interleave.
ALLREDUCE = (
    "import sys, horovod.tensorflow as hvd, tensorflow as tf; hvd.init(); "
    "v = hvd.allreduce(tf.constant([float(hvd.rank() + 1)]), op=hvd.Sum); "
    "sys.stdout.write('allreduce %d %d %.1f\\n' % (hvd.rank(), hvd.size(), float(v.numpy()[0])))"
)


# Runs LAUNCHER with a time limit; on a hang it prints the process tree and every Python
# process's stacks (PYTHONFAULTHANDLER: SIGABRT dumps them, the ranks' first, through the
# launcher that still forwards their stderr), then kills what is left and exits 124.
LAUNCH = r"""
cd /tmp
export PYTHONUNBUFFERED=1 TF_CPP_MIN_LOG_LEVEL=2 PYTHONFAULTHANDLER=1
tree() {{ for c in $(pgrep -P "$1"); do tree "$c"; echo "$c"; done; }}  # descendants, deepest first
out=$(mktemp)
{launcher} python3 -c "{code}" > "$out" 2>&1 &
pid=$!
for _ in $(seq {limit}); do kill -0 $pid 2>/dev/null || break; sleep 1; done
if kill -0 $pid 2>/dev/null; then
  echo "HUNG: {launcher} still running after {limit} s; processes:"
  ps -eo pid,ppid,etimes,stat,args --forest | cut -c1-200
  kids=$(tree $pid)
  for k in $kids; do case $(cat /proc/$k/comm 2>/dev/null) in python*) kill -ABRT $k;; esac; done
  sleep 3; kill -ABRT $pid 2>/dev/null; sleep 3
  kill -KILL $pid $kids 2>/dev/null; wait $pid
  cat "$out"; rm -f "$out"; exit 124
fi
wait $pid; rc=$?; cat "$out"; rm -f "$out"; exit $rc
"""


# Each rank fits y = x.w on its own samples; DistributedOptimizer averages the gradients,
# so the ranks' weights stay one model (their sums agree) while each rank's loss falls.
KERAS_FIT = (
    "import sys, numpy as np, tensorflow as tf, horovod.tensorflow.keras as hvd; hvd.init(); "
    "r = np.random.RandomState(hvd.rank()); x = r.normal(size=(256, 8)).astype('float32'); "
    "y = x.dot(np.arange(8, dtype='float32'))[:, None]; "
    "m = tf.keras.Sequential([tf.keras.layers.Dense(1, input_shape=(8,))]); "
    "m.compile(optimizer=hvd.DistributedOptimizer(tf.keras.optimizers.SGD(0.05)), loss='mse'); "
    "h = m.fit(x, y, epochs=4, batch_size=32, verbose=0, "
    "callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0)]); "
    "w = sum(float(v.sum()) for v in m.get_weights()); "
    "sys.stdout.write('fit %d %d %.5f %s\\n' % (hvd.rank(), hvd.size(), w, "
    "' '.join('%.4f' % v for v in h.history['loss'])))"
)


def launch(host, launcher: str, limit: int, code: str = ALLREDUCE):
    return host.run(LAUNCH.format(launcher=launcher, code=code, limit=limit))


@pytest.mark.parametrize(
    "launcher",
    [
        "horovodrun -np 2 --gloo",
        "mpirun --allow-run-as-root --oversubscribe -np 2",
    ],
)
def test_horovod_allreduces_across_two_processes(horovod, host, launcher):
    out = launch(host, launcher, limit=120)
    if out.rc == 124:
        # Seen once in about 20 CI runs under load (horovodrun --gloo, no output at all):
        # a hang is retried once and reported with its stacks; a second hang or any
        # failure fails the test.
        first = out.stdout[-6000:]
        warnings.warn(f"{launcher} hung once and was run again; its processes and stacks:\n{first}", stacklevel=2)
        out = launch(host, launcher, limit=240)
        assert out.rc == 0, f"hung, then: {out.stdout[-3000:]}\n--- the first hang:\n{first}"
    assert out.rc == 0, out.stdout[-3000:]
    results = re.findall(r"allreduce (\d) 2 ([\d.]+)", out.stdout)
    assert sorted(r for r, _ in results) == ["0", "1"], out.stdout[-3000:]
    assert all(float(v) == 3.0 for _, v in results)


def test_a_keras_model_trains_across_two_processes(horovod, host):
    out = launch(host, "horovodrun -np 2 --gloo", limit=300, code=KERAS_FIT)
    assert out.rc == 0, out.stdout[-3000:]
    ranks = {
        r: (float(w), [float(v) for v in losses.split()])
        for r, w, losses in re.findall(r"fit (\d) 2 (\S+) (.+)", out.stdout)
    }
    assert sorted(ranks) == ["0", "1"], out.stdout[-3000:]
    for _, losses in ranks.values():
        assert len(losses) == 4 and losses[-1] < losses[0] / 10, losses
    assert abs(ranks["0"][0] - ranks["1"][0]) < 1e-3, ranks  # one model, not two


def test_horovod_is_built_with_tensorflow_mpi_gloo_and_nccl(horovod, report):
    assert horovod["mpi_built"] is True and horovod["gloo_built"] is True
    if report["tensorflow"]["build_info"].get("is_cuda_build"):
        assert horovod["nccl_built"] is True and horovod["cuda_built"] is True


def test_horovod_binaries_carry_sass_for_each_capability(horovod, report, labels):
    want = digits(requested(labels))
    hvd_bins = [b for b in report["cuda_binaries"] if b["component"] == "horovod"]
    assert hvd_bins, "no Horovod binary with device code"
    # its PTX follows the extension's rule: the newest capability nvcc compiles (those only
    # a newer ptxas knows are assembled from it)
    ext_ptx = {tuple(b["ptx"]) for b in report["cuda_binaries"] if b["component"] == "extension"}
    assert len(ext_ptx) == 1, ext_ptx
    for b in hvd_bins:
        assert b["sass"] == want, b
        assert tuple(b["ptx"]) in ext_ptx, b


def test_horovod_patches_are_recorded(horovod, build_info, host, labels):
    if labels.get(Label.RUNTIME_OF):
        pytest.skip("a runtime image: the source and its patches stay in the devel image")
    shipped = host.run(f"ls {Horovod.patches_in_image()}/ 2>/dev/null").stdout.split()
    recorded = ((build_info.get("components") or {}).get(Horovod.NAME) or {}).get("patches") or []
    assert [p["name"] for p in recorded] == sorted(p for p in shipped if p.endswith(".patch"))
    for p in recorded:
        digest = host.check_output(f"sha256sum {Horovod.patches_in_image()}/{p['name']}").split()[0]
        assert digest == p["sha256"]
