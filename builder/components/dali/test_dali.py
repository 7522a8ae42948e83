"""NVIDIA DALI and its TensorFlow plugin, compiled in the image against its TensorFlow: a
CPU pipeline feeds a tf.data dataset that trains a model, with or without a GPU."""

import json
import shlex

import pytest

from builder.components.conformance import held
from builder.components.dali import Dali
from builder.core.contract import InImage, Label

# A CPU-only pipeline (device_id=None): random features and labels, fed to Keras through
# DALIDataset on the CPU; the loss must be finite and the batches the pipeline's shape.
FIT = r"""
import json, math, os
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
import tensorflow as tf
import nvidia.dali.fn as fn
import nvidia.dali.types as types
import nvidia.dali.plugin.tf as dali_tf
from nvidia.dali import pipeline_def

BATCH = 8

@pipeline_def(batch_size=BATCH, num_threads=1, device_id=None, seed=7)
def pipe():
    x = fn.random.uniform(range=[-1.0, 1.0], shape=[4], device="cpu")
    y = fn.cast(fn.random.coin_flip(probability=0.5, shape=[1]), dtype=types.FLOAT)
    return x, y

with tf.device("/cpu:0"):
    ds = dali_tf.DALIDataset(pipeline=pipe(), batch_size=BATCH, device_id=None,
                             output_shapes=((BATCH, 4), (BATCH, 1)), output_dtypes=(tf.float32, tf.float32))
    x, y = next(iter(ds))
    model = tf.keras.Sequential([tf.keras.layers.Input((4,)), tf.keras.layers.Dense(1, activation="sigmoid")])
    model.compile(optimizer="sgd", loss="binary_crossentropy")
    loss = model.fit(ds, epochs=2, steps_per_epoch=3, verbose=0).history["loss"]
print(json.dumps({"shape": [list(x.shape), list(y.shape)], "loss": loss,
                  "finite": all(math.isfinite(v) for v in loss)}))
"""


@pytest.fixture(scope="module")
def dali(report, release_data, labels):
    return held(Dali, report, release_data, labels)


def test_dali_and_its_plugin_are_the_catalogs_and_labelled(dali, release_data, labels):
    spec = release_data[0].components[Dali.NAME]
    assert Dali.problems(spec, dali) == [], dali
    assert dali["version"] == spec.version and dali["plugin"] == spec.version, dali.get("plugin_error")
    assert labels[Dali.LABEL] == f"{spec.version} (TensorFlow plugin {spec.version})"


def test_dali_plugin_was_compiled_here_against_this_tensorflow(dali, host, labels):
    """Not a prebuilt library of the sdist: nvbuild.sh's stamp and the one op library that loads."""
    if labels.get(Label.RUNTIME_OF):
        pytest.skip("a runtime image: the source and nvbuild.sh's stamp stay in the devel image")
    assert host.file(f"{InImage.HOME}/.dali-tf-plugin-build-id").is_file
    assert host.file(Dali.SOURCE + "/setup.py").is_file
    code = (
        "import importlib.metadata as m\n"
        "for d in m.distributions():\n"
        "    if (d.metadata['Name'] or '').startswith('nvidia-dali-tf-plugin'):\n"
        "        print(*[f for f in d.files if str(f).endswith('.so')], sep='\\n')"
    )
    files = host.run(f"python3 -c {shlex.quote(code)}")
    libraries = files.stdout.split()
    # the library compiled for this TensorFlow, none of the sdist's prebuilt ones (libdali_tf_2_13.so, ...)
    assert libraries == ["nvidia/dali_tf_plugin/libdali_tf_current.so"], files.stdout + files.stderr


def test_a_dali_cpu_pipeline_feeds_tf_data_and_trains(dali, host):
    out = host.run(f"cd / && timeout 600 python3 -c {shlex.quote(FIT)}")
    assert out.rc == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["shape"] == [[8, 4], [8, 1]] and len(result["loss"]) == 2 and result["finite"], result
